"""``tasks``: make benchmark tasks (``tasks synthesize``: SWE-style bugs from a repository)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated

import typer

from harnessevolve.cli._errors import fail, handle_errors
from harnessevolve.cli.options import JsonOut, Sandbox, SandboxLimitsOption, UnsafeNoSandbox, chosen_sandbox
from harnessevolve.cli.ui import console
from harnessevolve.core.enums import SandboxName
from harnessevolve.sandbox.base import make_sandbox
from harnessevolve.sandbox.launch import SandboxLimits
from harnessevolve.synth.synthesize import SynthesisOptions, dumps, summary_lines, synthesize

app = typer.Typer(help="Make benchmark tasks.", no_args_is_help=True)


@app.command("synthesize")
@handle_errors
def synthesize_cmd(
    repo: Annotated[
        Path,
        typer.Option(
            "--repo", help="A Python repository with a test suite (test*.py files run by unittest)."
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="The benchmark folder to write (tasks/, benchmark.yaml).")
    ],
    count: Annotated[int, typer.Option("--count", min=1, max=10_000, help="Tasks to keep.")] = 20,
    seed: Annotated[int, typer.Option("--seed", help="Seed for the order mutation sites are tried in.")] = 0,
    mutations: Annotated[
        int, typer.Option("--mutations", min=1, max=5, help="Mutations per task (more = harder).")
    ] = 1,
    max_tries: Annotated[
        int,
        typer.Option(
            "--max-tries", min=0, max=1_000_000, help="Mutants to try at most (0: 15 per wanted task)."
        ),
    ] = 0,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=1.0, max=3600.0, help="Seconds one run of the test suite may take."),
    ] = 60.0,
    jobs: Annotated[int, typer.Option("--jobs", min=1, max=32, help="Test-suite runs at once.")] = 2,
    name: Annotated[
        str,
        typer.Option("--name", help="Task id prefix (default: the repository folder's name, no version)."),
    ] = "",
    sandbox: Sandbox = SandboxName.BWRAP,
    unsafe_no_sandbox: UnsafeNoSandbox = False,
    sandbox_limits: SandboxLimitsOption = None,
    json_out: JsonOut = False,
) -> None:
    """Make SWE-style tasks from a repository: mutate its source (flipped comparisons and
    operators, off-by-one bounds, dropped statements and branches, swapped arguments) and keep a
    mutant only when the original passes and the mutant fails a specific, stable set of tests.
    Each task: the repository at the mutant, an instruction from the failing tests' output, a
    checker running those tests and the rest of the suite in the sandbox, the inverse patch as
    gold. Deterministic for a seed; nothing is written outside --out."""
    # --out is checked before the work: the nearest existing folder on its way must be writable
    existing = next((p for p in (out, *out.absolute().parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise fail(f"--out: {existing} is a file", hint="name a folder (it is created when missing)")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise fail(f"--out: cannot write in {existing}", hint="name a folder you can write")
    if out.resolve().is_relative_to(repo.resolve()):
        raise fail(f"--out: {out} lies inside --repo", hint="write the tasks outside the repository")
    box = make_sandbox(
        chosen_sandbox(sandbox, unsafe_no_sandbox),
        limits=SandboxLimits.parse(sandbox_limits) if sandbox_limits else None,
        unsafe=unsafe_no_sandbox,
    )
    opts = SynthesisOptions(
        count=count,
        seed=seed,
        mutations=mutations,
        max_tries=max_tries,
        timeout_s=timeout,
        jobs=jobs,
        name=name,
    )

    def progress(kept: int, tried: int) -> None:
        if not json_out:
            console.print(f"  {kept}/{count} kept, {tried} tried", highlight=False)

    report = asyncio.run(synthesize(repo, out, opts, sandbox=box, on_progress=progress))
    if json_out:
        typer.echo(dumps(report))
        return
    for line in summary_lines(report):
        console.print(line, highlight=False)
    console.print(f"wrote {len(report.kept)} tasks to {out / 'tasks'} (record: {out / 'synthesis.json'})")
