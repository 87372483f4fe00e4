"""``clean``: remove what killed runs left on this machine (temp folders, mounted workspaces)."""

from __future__ import annotations

import json

import typer

from harnessevolve.cli._errors import handle_errors
from harnessevolve.cli.options import JsonOut

EXIT_LEFT = 3
"""Something could not be removed (an infrastructure problem, not bad input)."""


@handle_errors
def clean(as_json: JsonOut = False) -> None:
    """Unmount and remove the workspaces and temp folders of runs whose process is gone (a
    ``kill -9`` leaves them; the next run also sweeps them). Says exactly what was removed and
    what could not be, with why; exits 3 when something is left."""
    from harnessevolve.runs.tempdirs import clean as sweep

    swept = sweep()
    if as_json:
        typer.echo(json.dumps(swept.to_dict(), indent=2))
    elif not (swept.removed or swept.unmounted or swept.left):
        typer.echo("nothing to clean: no run left a temp folder or a mounted workspace")
    else:
        typer.echo(
            f"removed {len(swept.removed)} temp folder(s) and unmounted {len(swept.unmounted)} "
            "workspace(s) left by killed runs"
        )
        for name in swept.removed:
            typer.echo(f"  removed {name}")
        for path, reason in swept.left:
            typer.echo(f"  could not remove {path}: {reason}")
    if swept.left:
        raise typer.Exit(EXIT_LEFT)
