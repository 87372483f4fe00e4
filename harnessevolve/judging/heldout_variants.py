"""Held-out variants for ``report --final --variants N``: up to N synthesized variants of each test
task, made by the environment-evolution makers (``synth/variants.py``) where one applies:

- ``more-mutations`` for synthesized SWE tasks (``swe-synth``): one more bug on top of the task's;
- ``chain`` for plain single-turn tasks with a gold solution: the task followed by other *test*
  tasks (never train ones, so a variant is as held-out as its parent), a different partner set per
  seed.

A variant is kept only when its gold solution passes its checker (replayed in the sandbox), so a
drop on variants is the harness's, not a broken task's. Variants are test tasks of the report
only: written under the run folder (``final/variants/tasks/``), never added to the benchmark.
The drop from original to variant (mean over the parents that got a variant) is reported for the
seed and the evolved harness: an evolved harness that fits its test tasks' surface and not the
skill shows a larger drop than the seed.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harnessevolve.core import paths
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.files import atomic_write_text, read_yaml
from harnessevolve.core.tasks import Benchmark, BenchmarkSettings, Task, load_task
from harnessevolve.harness.load import load_harness
from harnessevolve.sandbox.base import Sandbox
from harnessevolve.scoring.references import replay_gold
from harnessevolve.scoring.scorer import TaskResult
from harnessevolve.synth.variants import Variant, chain, chainable, more_mutations


@dataclass(frozen=True)
class TestVariants:
    tasks: tuple[Task, ...]
    parents: dict[str, str]
    """Variant id -> its parent test task."""
    makers: dict[str, int]
    skipped: dict[str, str] = field(default_factory=dict)
    """Parent -> why it got no variant."""


def _documents(benchmark: Benchmark) -> dict[str, dict[str, Any]]:
    docs: dict[str, dict[str, Any]] = {}
    for task in benchmark.split("test"):
        path = benchmark.root / "tasks" / f"{task.id}.yaml"
        if path.is_file():
            docs[task.id] = read_yaml(path, error=BenchmarkError)
    return docs


async def _make(
    parent: dict[str, Any], pool: Sequence[dict[str, Any]], seed: int, sandbox: Sandbox | None
) -> Variant | None:
    if "swe-synth" in parent.get("tags", []):
        return await more_mutations(parent, seed=seed, sandbox=sandbox)
    if chainable(parent):
        return chain(parent, pool, seed=seed)
    return None


async def make_test_variants(
    benchmark: Benchmark, per_task: int, *, seed: int, sandbox: Sandbox | None, folder: Path
) -> TestVariants:
    """Up to ``per_task`` sound variants of each test task (see the module docstring)."""
    docs = _documents(benchmark)
    first = benchmark.split("test")
    settings = BenchmarkSettings(
        python_path=first[0].python_path if first else (),
        read_only_paths=first[0].read_only_paths if first else (),
    )
    gold_agent = load_harness(paths.builtin_dir("harnesses") / "shell-agent")
    tasks: list[Task] = []
    parents: dict[str, str] = {}
    makers: Counter[str] = Counter()
    skipped: dict[str, str] = {}
    for task in first:
        parent = docs.get(task.id)
        if parent is None:
            skipped[task.id] = "no task file (an adapter's task): no maker applies"
            continue
        pool = [d for tid, d in sorted(docs.items()) if tid != task.id]
        kept = 0
        for attempt in range(per_task * 3):
            if kept >= per_task:
                break
            variant = await _make(parent, pool, seed * 1000 + attempt, sandbox)
            if variant is None:
                skipped.setdefault(
                    task.id, "no maker applies (multi-turn, task tools, no gold, python checks)"
                )
                break
            if variant.task_id in parents:
                continue
            doc = {**variant.doc, "split": "test"}
            path = folder / "tasks" / f"{variant.task_id}.yaml"
            atomic_write_text(path, yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
            try:
                made = load_task(path, settings)
                await replay_gold(gold_agent, made, sandbox=sandbox)
            except BenchmarkError as exc:
                path.unlink(missing_ok=True)
                skipped.setdefault(task.id, f"variant not solvable: {exc.message}"[:200])
                continue
            tasks.append(made)
            parents[made.id] = task.id
            makers[variant.maker] += 1
            kept += 1
        if kept:
            skipped.pop(task.id, None)
    return TestVariants(tuple(tasks), parents, dict(makers), skipped)


def variant_drop(
    variants: TestVariants, original: Sequence[TaskResult], on_variants: Sequence[TaskResult]
) -> dict[str, Any]:
    """Mean score on the parents that got variants, on their variants, and the drop between."""
    by_id = {r.task_id: r.score for r in original}
    parents = sorted(set(variants.parents.values()))
    before = statistics.fmean(by_id[p] for p in parents) if parents else 0.0
    after = statistics.fmean(r.score for r in on_variants) if on_variants else 0.0
    return {"original": round(before, 4), "variant": round(after, 4), "drop": round(before - after, 4)}
