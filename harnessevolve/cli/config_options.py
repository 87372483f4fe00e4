"""Command-line options made from the run configuration's declarations (``runs/run_config.py``):
name, spelling, default, bounds and help live once, on the configuration's field; ``run`` offers
them all and ``gate`` the ones it shares, so neither copies a declaration.

``config_command(func, keys, own=...)`` is the typer callback: its signature is one parameter per
declared option (plus the command's ``own``), and it calls ``func(values, **own)`` with the declared
options' values by flat key, converted from their command-line form (``from_cli``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from harnessevolve.core.enums import SandboxName
from harnessevolve.runs.run_config import Declared, declarations
from harnessevolve.sandbox.views import protected_folders, refuse_read_only

PANELS = {
    None: "Harness and benchmark",
    "loop": "Generation loop",
    "scoring": "Scoring",
    "optimize": "Proposers",
    "budget": "Budgets",
    "execution": "Execution and sandbox",
    "floor": "Null-agent floor",
    "evolve": "Environment evolution",
    "training": "Policy training",
}
"""A ``--help`` panel per configuration section."""
OUTPUT_PANEL = "Tracking, resume and output"
PANEL_OF = {"track": OUTPUT_PANEL}
"""Options shown in another panel than their section's."""

CLI_FORM: dict[str, tuple[Any, Any]] = {
    "harness_dir": (Path, Path(".")),
    "benchmark": (str | None, None),
    "proposers": (str, "auto"),
    "adapters": (list[str] | None, None),
    "sandbox_ro": (list[Path] | None, None),
}
"""Key -> (type, default) on the command line where they differ from the field's: a comma list,
a repeatable option, a path relative to the current folder."""


def by_key() -> dict[str, Declared]:
    return {d.key: d for d in declarations()}


def typer_parameter(d: Declared, *, panels: bool, help_extra: str = "") -> inspect.Parameter:
    """The typer parameter of one declared option."""
    hint, default = CLI_FORM.get(d.key, (d.hint, d.default))
    spec = d.option
    flags = spec.flags or ()
    info = typer.Option(
        *flags,
        help=spec.help + help_extra,
        min=spec.min,
        max=spec.max,
        rich_help_panel=PANEL_OF.get(d.key, PANELS[d.section]) if panels else None,
    )
    return inspect.Parameter(
        d.cli_name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[hint, info]
    )


def from_cli(values: dict[str, Any]) -> dict[str, Any]:
    """Declared options' command-line values (by flat key) in the configuration's form."""
    out = dict(values)
    if "proposers" in out:
        out["proposers"] = tuple(p.strip() for p in str(out["proposers"]).split(",") if p.strip())
    if "sandbox" in out:
        out["sandbox"] = chosen_sandbox(out["sandbox"], bool(out.get("unsafe_no_sandbox")))
    if "sandbox_ro" in out:
        out["sandbox_ro"] = read_only_paths(out["sandbox_ro"], harness=out.get("harness_dir"))
    if "adapters" in out:
        out["adapters"] = tuple(out["adapters"] or ())
    return out


def config_command(
    func: Callable[..., Any],
    keys: Sequence[str],
    *,
    own: Sequence[inspect.Parameter] = (),
    panels: bool = True,
    help_extra: dict[str, str] | None = None,
) -> Callable[..., Any]:
    """A typer callback offering the declared options ``keys`` and the command's ``own`` parameters;
    it calls ``func(values, **own)``, ``values`` the declared options by flat key (``from_cli``)."""
    table = by_key()
    chosen = [table[k] for k in keys]
    params = [typer_parameter(d, panels=panels, help_extra=(help_extra or {}).get(d.key, "")) for d in chosen]
    names = {d.cli_name: d.key for d in chosen}

    @functools.wraps(func)
    def callback(**kwargs: Any) -> Any:
        values = {key: kwargs.pop(name) for name, key in names.items()}
        return func(from_cli(values), **kwargs)

    callback.__signature__ = inspect.Signature(params + list(own))  # type: ignore[attr-defined]
    del callback.__wrapped__  # typer reads the signature above, not func's
    return callback


def own_option(
    name: str, hint: Any, default: Any, *flags: str, panel: str | None = None, **kw: Any
) -> inspect.Parameter:
    """A parameter of the command's own (not a configuration field)."""
    info = typer.Option(*flags, rich_help_panel=panel, **kw)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[hint, info]
    )


def chosen_sandbox(sandbox: SandboxName, unsafe_no_sandbox: bool) -> SandboxName:
    """The sandbox agent commands run in: ``--sandbox``, or none with ``--unsafe-no-sandbox``."""
    return SandboxName.NONE if unsafe_no_sandbox else SandboxName(sandbox)


def read_only_paths(paths: Sequence[Path] | None, *, harness: Path | None = None) -> tuple[str, ...]:
    """``--sandbox-ro`` values as absolute paths; ``/``, the temp folder, the ``harness``, its run
    folder or a folder above one of them is refused (``SandboxError``: exit 2, with why)."""
    resolved = tuple(str(Path(p).resolve()) for p in paths or [])
    refuse_read_only(resolved, protected_folders(Path(harness).resolve() if harness else None))
    return resolved
