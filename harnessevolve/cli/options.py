"""Option types shared by several commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harnessevolve.core.enums import SandboxName
from harnessevolve.sandbox.views import protected_folders, refuse_read_only

HarnessDir = Annotated[Path, typer.Option("--harness", "-H", help="The harness directory.")]
Benchmark = Annotated[
    str,
    typer.Option("--benchmark", "-b", help="A built-in benchmark's name (e.g. shell-basics) or a folder."),
]
Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Agent model, any litellm name (openai/..., scripted/...); default: the harness's.",
    ),
]
Seed = Annotated[int, typer.Option(help="Seed for minibatch sampling and model calls.")]
Concurrency = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Rollouts run at once (default: for local/ models the local pool's size, "
        "HARNESSEVOLVE_LOCAL_POOL, 1 when unset; else 4).",
    ),
]
BatchSize = Annotated[int, typer.Option("--batch-size", min=1, help="Train tasks per minibatch.")]
GatesFile = Annotated[
    Path | None,
    typer.Option(
        "--gates",
        help="Gate thresholds YAML, or a shipped one by name: default, paper (accept-on-tie). "
        "Default: gates/default.yaml.",
    ),
]
JsonOut = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]
Sandbox = Annotated[
    SandboxName,
    typer.Option(
        "--sandbox",
        help="Where agent commands run: bwrap (bubblewrap: no network, writes only in the task "
        "workspace, CPU/memory/process/file limits) or docker (needs a running engine).",
    ),
]
UnsafeNoSandbox = Annotated[
    bool,
    typer.Option(
        "--unsafe-no-sandbox",
        help="Run agent commands with no isolation at all (only for trusted models on a throwaway machine).",
    ),
]
SandboxLimitsOption = Annotated[
    str | None,
    typer.Option(
        "--sandbox-limits",
        help="Limits of sandboxed commands, e.g. cpu_s=120,memory_mb=2048. Per process: cpu_s, "
        "memory_mb, max_processes, max_file_mb (defaults 60 s, 1024 MiB, 256, 64 MiB); per rollout: "
        "rollout_memory_mb, rollout_processes, workspace_mb, workspace_files (2048 MiB, 256, "
        "1024 MiB, 100000; see docs/threat-model.md).",
    ),
]
AdapterOption = Annotated[
    list[str] | None,
    typer.Option(
        "--adapter",
        help="module:attr of a benchmark adapter to load --benchmark with, imported from the current "
        "directory without installing it (repeatable).",
    ),
]
ControlK = Annotated[
    int | None,
    typer.Option(
        "--control-k",
        min=0,
        help="Samples per test task of the matched-budget control, given by hand instead of matched to "
        "the run's rollouts (then marked 'not matched'); 0 leaves the control out. Only where the "
        "control is scored: gate --split test, report --final.",
    ),
]
SandboxReadOnly = Annotated[
    list[Path] | None,
    typer.Option(
        "--sandbox-ro",
        help="A host path every sandboxed command and tool may read, read-only (repeatable; "
        "benchmark.yaml sandbox_ro adds more).",
    ),
]


def chosen_sandbox(sandbox: SandboxName, unsafe_no_sandbox: bool) -> SandboxName:
    """The sandbox agent commands run in: ``--sandbox``, or none with ``--unsafe-no-sandbox``."""
    return SandboxName.NONE if unsafe_no_sandbox else SandboxName(sandbox)


def read_only_paths(paths: list[Path] | None, *, harness: Path | None = None) -> tuple[str, ...]:
    """``--sandbox-ro`` values as absolute paths; ``/``, the temp folder, the ``harness``, its run
    folder or a folder above one of them is refused (``SandboxError``: exit 2, with why)."""
    resolved = tuple(str(p.resolve()) for p in paths or [])
    refuse_read_only(resolved, protected_folders(harness.resolve() if harness else None))
    return resolved
