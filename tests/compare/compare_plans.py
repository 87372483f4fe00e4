"""Plans, benchmarks and harnesses the ``compare`` tests share, and running the command."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from bench_subset import shell_basics_subset
from typer.testing import CliRunner, Result

from harnessevolve.cli.app import app as main_app
from harnessevolve.cli.compare_cmd import app
from harnessevolve.core.tasks import load_benchmark

LEARNER = "scripted/policy:learner"
"""Fails every task of the seed harness; solves a family once the prompt demonstrates it."""
FAMILY = "count-lines"
EVOLVE = {"generations": 1, "batch_size": 2, "proposers": ["demo"]}


def subset(root: Path) -> Path:
    """shell-basics cut to one family: 4 train, 2 validation, 2 test tasks."""
    return shell_basics_subset(root / "bench" / "shell-basics", (FAMILY,))


def hand_harness(root: Path, bench: Path) -> Path:
    """The template, committed, plus a hand-written demonstration of one train task of the family
    (uncommitted): the learner solves the family's test tasks with it, not without."""
    target = root / "hand"
    made = CliRunner().invoke(main_app, ["init", str(target)])
    assert made.exit_code == 0, made.output
    task = load_benchmark(str(bench)).task(f"{FAMILY}-01")
    gold = "\n".join(json.dumps({"tool": g.tool, "arguments": g.arguments}) for g in task.gold)
    (target / "prompts" / "examples.md").write_text(f"## Example\nTask: {task.instruction}\n{gold}\n")
    return target


def write_plan(folder: Path, name: str = "plan.yaml", **fields: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"version": 1, **fields}
    path = folder / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def every_arm(bench: Path, hand: Path, seeds: Sequence[int] = (0, 1)) -> dict[str, Any]:
    """A plan with one arm of each kind compare runs."""
    return {
        "model": LEARNER,
        "benchmark": str(bench),
        "harness": {"template": "shell-agent"},
        "seeds": list(seeds),
        "arms": [
            {"kind": "seed"},
            {"name": "evolve", "kind": "evolve", "options": EVOLVE},
            {"kind": "best-of-k", "matched_to": "evolve"},
            {"name": "hand", "kind": "harness", "path": str(hand)},
        ],
    }


def compare(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def table_of(result: Result) -> dict[str, Any]:
    """The ``--json`` document of a compare or merge that succeeded."""
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["label"]: row for row in doc["table"]["rows"]}


def result_file(out: Path, arm: str, seed: int) -> Path:
    return out / "cells" / arm / f"seed-{seed}" / "result.json"


def read_result(out: Path, arm: str, seed: int) -> dict[str, Any]:
    return json.loads(result_file(out, arm, seed).read_text())
