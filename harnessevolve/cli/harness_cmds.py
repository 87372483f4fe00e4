"""``init`` and ``validate``: create a harness from a template, check one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Annotated

import typer

from harnessevolve.cli._errors import EXIT_BAD_INPUT, handle_errors
from harnessevolve.cli.options import AdapterOption, JsonOut, Sandbox, UnsafeNoSandbox, chosen_sandbox
from harnessevolve.cli.ui import console
from harnessevolve.core import paths
from harnessevolve.core.containment import check_output_path
from harnessevolve.core.enums import SandboxName
from harnessevolve.core.errors import HarnessError
from harnessevolve.harness.git import HarnessRepo, ensure_run_state_ignored
from harnessevolve.harness.load import IGNORED_PARTS, load_harness, validate_harness


def templates() -> list[str]:
    root = paths.builtin_dir("harnesses")
    return sorted(p.name for p in root.iterdir() if (p / "harness.yaml").is_file()) if root.is_dir() else []


def print_templates() -> None:
    """Each template with the runner it names (``agent.kind``) and its description."""
    from rich.table import Table

    from harnessevolve.core.files import read_yaml

    table = Table("template", "runner", "description")
    for name in templates():
        doc = read_yaml(paths.builtin_dir("harnesses") / name / "harness.yaml", error=HarnessError)
        table.add_row(
            name, str((doc.get("agent") or {}).get("kind", "builtin")), str(doc.get("description", ""))
        )
    console.print(table)


@handle_errors
def init(
    directory: Annotated[
        Path | None, typer.Argument(help="Where to create the harness (new or empty folder).")
    ] = None,
    template: Annotated[
        str, typer.Option("--template", "-t", help="A template from harnesses/ (see --list-templates).")
    ] = "shell-agent",
    list_templates: Annotated[
        bool, typer.Option("--list-templates", help="List the templates and the runner each uses, then exit.")
    ] = False,
) -> None:
    """Create a harness from a template and commit it (a new repo, or a folder of the enclosing one)."""
    if list_templates:
        print_templates()
        return
    if directory is None:
        raise HarnessError(
            "missing DIRECTORY", field="DIRECTORY", hint="harnessevolve init DIR [--template NAME]"
        )
    source = paths.builtin_dir("harnesses") / template
    if not (source / "harness.yaml").is_file():
        raise HarnessError(
            f"unknown template {template!r}",
            field="--template",
            hint=f"templates: {', '.join(templates()) or 'none'}",
        )
    check_output_path(directory, option="DIRECTORY", kind="folder")
    if directory.exists() and any(directory.iterdir()):
        raise HarnessError(
            "folder exists and is not empty",
            file=str(directory),
            hint="pick a new folder; init never overwrites files",
        )
    shutil.copytree(
        source,
        directory,
        dirs_exist_ok=True,
        ignore=lambda _d, names: [n for n in names if n in IGNORED_PARTS],
    )
    ensure_run_state_ignored(directory)
    try:
        load_harness(directory)
        repo = HarnessRepo.init_or_open(directory)
        sha = repo.commit_all(f"harnessevolve: new harness from template {template}\n")
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    where = "its own new repository" if repo.rel == "." else f"folder {repo.rel} of {repo.top}"
    console.print(
        f"Created harness [bold]{directory}[/] from template {template} in {where} (commit {sha[:8]})."
    )


@handle_errors
def validate(
    directory: Annotated[
        Path,
        typer.Argument(
            help="A harness directory (harness.yaml), a benchmark folder (benchmark.yaml) or any "
            "--benchmark spec (nl2bash:5, harbor:PATH, NAME:SPEC of an --adapter)."
        ),
    ] = Path("."),
    floor: Annotated[
        bool,
        typer.Option(
            "--floor",
            help="Benchmarks: also run a do-nothing agent and trivial ones (empty answer; echoes the "
            "instruction) on every task, scored by the task's own checks in the sandbox, and list the "
            "tasks they pass (a checker that passes without the work). Exit 2 when any does.",
        ),
    ] = False,
    sandbox: Sandbox = SandboxName.BWRAP,
    unsafe_no_sandbox: UnsafeNoSandbox = False,
    adapter: AdapterOption = None,
    as_json: JsonOut = False,
) -> None:
    """Check a harness (every file against its schema, and that it loads) or a benchmark folder
    (every task file, its checks and the reference trajectories). Exit 2 when anything is wrong;
    with --floor, also when a do-nothing or trivial agent passes a task. With --adapter, the
    benchmark is loaded through that adapter, as ``run --adapter`` loads it."""
    from harnessevolve.adapters.validate import validate_spec

    adapters = tuple(adapter or ())
    is_harness = (directory / "harness.yaml").is_file() and not adapters
    report = None if is_harness else validate_spec(str(directory), adapters)
    if report is not None and floor and not report.problems:
        from harnessevolve.cli.floor_view import floor_of_suite

        floor_of_suite(
            str(directory), chosen_sandbox(sandbox, unsafe_no_sandbox), unsafe_no_sandbox, as_json, adapters
        )
        return
    if report is not None:
        if as_json:
            console.print_json(json.dumps(report.to_dict()))
        elif report.problems:
            console.print(f"[red]invalid[/]: benchmark {directory}: {len(report.problems)} problem(s)")
            for p in report.problems:
                console.print(f"  {p}", markup=False)
        else:
            splits = ", ".join(f"{n} {s}" for s, n in report.by_split.items())
            console.print(
                f"[green]valid[/]: benchmark {report.name} ({report.tasks} tasks: {splits}; "
                f"{report.references} reference trajectories)"
            )
        if not as_json and not report.problems:
            for note in report.notes:
                console.print(f"  note: {note}", markup=False)
        if report.problems:
            raise typer.Exit(EXIT_BAD_INPUT)
        return
    problems = validate_harness(directory)
    if as_json:
        console.print_json(json.dumps({"valid": not problems, "problems": [p.__dict__ for p in problems]}))
    elif problems:
        console.print(f"[red]invalid[/]: {directory}: {len(problems)} problem(s)")
        for problem in problems:
            console.print(f"  {problem}", markup=False)
        hint = next((problem.hint for problem in problems if problem.hint), "")
        if hint and (directory / "harness.yaml").exists():
            console.print(f"Hint: {hint}", markup=False)
        if not (directory / "harness.yaml").exists():
            console.print(
                "  hint: validate takes a harness directory (harness.yaml) or a benchmark folder "
                "(benchmark.yaml)",
                markup=False,
            )
    else:
        harness = load_harness(directory)
        console.print(
            f"[green]valid[/]: {harness.name} ("
            + (f"runner {harness.agent.kind}, " if harness.agent.kind != "builtin" else "")
            + f"{len(harness.tools)} tools, {len(harness.skills)} skills, "
            f"{len(harness.files)} files, prompt {len(harness.assembled_prompt())} chars)"
        )
    if problems:
        raise typer.Exit(EXIT_BAD_INPUT)
