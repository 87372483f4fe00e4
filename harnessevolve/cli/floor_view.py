"""``validate SUITE --floor``: the null-agent floor of every task of a benchmark, as a table."""

from __future__ import annotations

import asyncio
import json
import os

import typer
from rich.markup import escape
from rich.table import Table

from harnessevolve.cli._errors import EXIT_BAD_INPUT
from harnessevolve.cli.ui import console
from harnessevolve.core.tasks import Check, Task


def describe_checks(task: Task) -> str:
    """The task's checks in a few words (``command `true```, ``file out.txt``)."""

    def one(check: Check) -> str:
        if check.type == "command":
            return f"command `{check.run[:40]}`"
        if check.type == "file":
            return f"file {check.path}"
        if check.type == "answer":
            return f"answer {check.match}"
        return check.type

    return "; ".join(one(c) for c in task.checks)


def floor_of_suite(
    spec: str, sandbox_name: str, unsafe: bool, as_json: bool, adapters: tuple[str, ...] = ()
) -> None:
    """Run the null agents on every task of ``spec``; exit 2 when any task passes one of them."""
    from harnessevolve.adapters import load_benchmark_spec
    from harnessevolve.execute.tool_server import benchmark_sandbox
    from harnessevolve.judging.floor import NULL_AGENTS, null_floor
    from harnessevolve.sandbox.base import make_sandbox

    benchmark = load_benchmark_spec(spec, adapters)
    sandbox = make_sandbox(sandbox_name, unsafe=unsafe)
    sandbox = benchmark_sandbox(sandbox, benchmark, ()) or sandbox
    load = os.getloadavg()[0]
    result = asyncio.run(null_floor(benchmark.tasks, sandbox))
    by_id = {t.id: t for t in benchmark.tasks}
    if as_json:
        console.print_json(
            json.dumps({"benchmark": benchmark.name, **result.to_dict(), "load_average_1m": load})
        )
    else:
        console.print(
            f"floor of benchmark {benchmark.name}: {len(result.passed)} of {len(result.tasks)} tasks "
            f"({result.share:.0%}) pass a null agent ({', '.join(NULL_AGENTS)}); null-agent score "
            f"{result.score:.3f} (partial credit included); "
            f"{result.rollouts} null rollouts, no model call, {result.seconds:.1f} s "
            f"(load average {load:.2f})"
        )
        if result.passed:
            console.print("passed by a null agent: " + ", ".join(result.passed), markup=False)
            table = Table("task", "split", "passed by", "checks", title="tasks a null agent passes")
            for task_id, agents in result.passed.items():
                task = by_id[task_id]
                table.add_row(task_id, task.split, ", ".join(agents), escape(describe_checks(task)))
            console.print(table)
            console.print(
                "[red]these checkers pass without the work[/]: fix them, or run with --accept-floor "
                "when the benchmark means it (gold that leaves the state unchanged)"
            )
        for task_id, error in result.errors.items():
            console.print(f"  note: {task_id}: not checked: {error}", markup=False)
    if result.passed:
        raise typer.Exit(EXIT_BAD_INPUT)
