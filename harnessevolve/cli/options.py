"""Option types shared by several commands. Those that are run options are made from their one
declaration on the run configuration's field (``cli/config_options.py``); the rest are declared here."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from harnessevolve.cli.config_options import by_key, chosen_sandbox, read_only_paths, typer_parameter
from harnessevolve.core.enums import SandboxName

__all__ = ["chosen_sandbox", "read_only_paths"]


def declared_type(key: str) -> Any:
    """The ``Annotated`` option type of run option ``key``, as ``run`` declares it (no help panel)."""
    return typer_parameter(by_key()[key], panels=False).annotation


if TYPE_CHECKING:  # what a type checker sees; at run time each carries its declaration
    HarnessDir = Path
    Model = str | None
    Seed = int
    Concurrency = int | None
    BatchSize = int
    GatesFile = Path | None
    Sandbox = SandboxName
    UnsafeNoSandbox = bool
    SandboxLimitsOption = str | None
    AdapterOption = list[str] | None
    SandboxReadOnly = list[Path] | None
else:
    HarnessDir = declared_type("harness_dir")
    Model = declared_type("model")
    Seed = declared_type("seed")
    Concurrency = declared_type("concurrency")
    BatchSize = declared_type("batch_size")
    GatesFile = declared_type("gates_file")
    Sandbox = declared_type("sandbox")
    UnsafeNoSandbox = declared_type("unsafe_no_sandbox")
    SandboxLimitsOption = declared_type("sandbox_limits")
    AdapterOption = declared_type("adapters")
    SandboxReadOnly = declared_type("sandbox_ro")

Benchmark = Annotated[
    str,
    typer.Option("--benchmark", "-b", help="A built-in benchmark's name (e.g. shell-basics) or a folder."),
]
JsonOut = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]
ControlK = Annotated[
    int | None,
    typer.Option(
        "--control-k",
        min=0,
        max=100,
        help="Samples per test task of the matched-budget control, given by hand instead of matched to "
        "the run's rollouts (then marked 'not matched'); 0 leaves the control out. Only where the "
        "control is scored: gate --split test, report --final.",
    ),
]
