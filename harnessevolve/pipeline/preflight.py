"""Checks ``run`` makes before anything is written (no lock, no run folder, no commit): what the
schemas cannot say about the harness, the benchmark, the gates and the options together.

Each raises a :class:`HarnessEvolveError` naming the file (or option) and the field."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harnessevolve.core.containment import check_output_path
from harnessevolve.core.enums import BROKEN_AGENT_STOPS
from harnessevolve.core.errors import BenchmarkError, HarnessError, HarnessEvolveError
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.gate.config import GateConfig
from harnessevolve.harness.model import Harness
from harnessevolve.models.preflight import check_model_name
from harnessevolve.optimize.proposal import ProposerChain


def check_prompt_cap(harness: Harness, gates: GateConfig, harness_yaml: str = "harness.yaml") -> None:
    """A prompt already above the quality gate's cap could never pass: every edit would be refused."""
    chars, cap = len(harness.assembled_prompt()), gates.quality.max_prompt_chars
    if chars > cap:
        raise HarnessError(
            f"the prompt is {chars} chars, above the quality gate's cap of {cap} (no edit could pass)",
            file=harness_yaml,
            field="system_prompt",
            hint=f"shorten prompt, skills or examples, or raise quality.max_prompt_chars in {gates.source}",
        )


def check_proposers_reach(harness: Harness, proposer: ProposerChain) -> None:
    """Before any rollout: at least one of the chosen proposers can edit something in this harness
    (``optimize.proposal.reaches``); else every generation would end with "proposer had nothing new"."""
    from harnessevolve.optimize.proposal import anything_editable, reach_parts, reaches
    from harnessevolve.proposing.context import reach_context

    context = reach_context(harness)
    if any(reaches(p, context) for p in proposer.proposers):
        return
    names = ", ".join(p.name for p in proposer.proposers)
    opened = ", ".join(harness.editable) or "nothing"
    if not anything_editable(context):
        raise HarnessError(
            f"nothing in this harness is editable (editable: {opened}), so no proposer ({names}) can edit it",
            file="harness.yaml",
            field="editable",
            hint="list what the optimizer may change under editable, e.g. prompts/*.md or harness.yaml#loop",
        )
    needs = "; ".join(f"{p.name}: {reach_parts(p)}" for p in proposer.proposers)
    raise HarnessError(
        f"none of the proposers ({names}) can edit this harness: what they edit ({needs}) is not "
        f"in its editable list ({opened})",
        file="harness.yaml",
        field="editable",
        hint="pass --optimizer-model MODEL (the llm proposer edits any editable file) or --proposer agent",
    )


def check_seed_leakage(harness: Harness, benchmark: Benchmark, gates: GateConfig) -> None:
    """A seed harness that already holds a held-out task (its instruction, answer or context, in any
    channel into a prompt) would score that task with its answer in view: refused before any rollout."""
    from harnessevolve.gate.leakage import harness_leak

    found = harness_leak(harness.files, benchmark.tasks, gates.leakage)
    if found is not None:
        path, verdict = found
        raise HarnessError(
            f"already {verdict.reason}",
            file=str(harness.root / path),
            field="leakage",
            hint="take the held-out task's text out of the harness (or move the task to the train split)",
        )


def check_context_window(harness: Harness, benchmark: Benchmark, model: str) -> None:
    """The seed's prompt and tools, the largest task's context and tools and the reply fit the
    model's context window (when it is known): else that task could not run, and the quality
    gate, which counts the same, would refuse every edit."""
    from harnessevolve.gate.quality import rendered_window

    window = rendered_window(harness, model, benchmark.tasks)
    if window.over:
        raise BenchmarkError(
            window.reason().replace("prompt overflows", "the seed's prompt overflows", 1),
            file=_task_file(benchmark, window.task_id) if window.task_id else str(harness.root),
            field="context" if window.task_tokens else "system_prompt",
            hint="shorten the task's context or tools or the harness's prompt, lower loop.max_tokens, "
            "or use a model with a larger window (local models: HARNESSEVOLVE_LOCAL_N_CTX)",
        )


def _task_file(benchmark: Benchmark, task_id: str) -> str:
    path = benchmark.root / "tasks" / f"{task_id}.yaml"
    return str(path if path.is_file() else benchmark.root)


def check_benchmark(benchmark: Benchmark, gates: GateConfig, heldout_split: str | None = None) -> None:
    """Splits the run (or ``gate``, with its own held-out split) needs are not empty; every regex a
    checker uses compiles."""
    for split, why in (
        ("train", "minibatches are drawn from it"),
        (heldout_split or gates.heldout.split, "the held-out gate"),
    ):
        if not benchmark.split(split):  # type: ignore[arg-type]
            raise BenchmarkError(
                f"no {split} tasks ({why} needs them); {len(benchmark.tasks)} task(s) in other splits",
                file=str(benchmark.root),
                field="split",
                hint=f"mark some tasks 'split: {split}'",
            )
    for task in benchmark.tasks:
        for index, check in enumerate(task.checks):
            if getattr(check, "match", "") != "regex":
                continue
            try:
                re.compile(check.expected)
            except re.error as exc:
                raise BenchmarkError(
                    f"invalid regular expression {check.expected!r}: {exc}",
                    file=_task_file(benchmark, task.id),
                    field=f"checker[{index}].expected",
                    hint="fix the pattern (Python re syntax), or use match: exact/contains",
                ) from None


def check_models(agent_model: str, optimizer_model: str | None, gates: GateConfig) -> None:
    check_model_name(agent_model, option="--model")
    if optimizer_model:
        check_model_name(optimizer_model, option="--optimizer-model")
    if gates.leakage.judge_model:
        check_model_name(gates.leakage.judge_model, option=f"{gates.source}: leakage.judge_model")


def check_tracker(kind: str | None) -> None:
    """The tracker is known and its package importable (it is created only after the run folder)."""
    from harnessevolve.report.tracking import TRACKERS

    if kind in (None, "", "none", "off"):
        return
    if kind not in TRACKERS:
        raise HarnessEvolveError(
            f"unknown tracker {kind!r}", field="--track", hint=f"use one of: none, {', '.join(TRACKERS)}"
        )
    import importlib.util

    if kind == "mlflow" and importlib.util.find_spec("mlflow") is None:
        raise HarnessEvolveError(
            "MLflow tracking needs mlflow", field="--track", hint="pip install 'harnessevolve[tracking]'"
        )


def check_state_dir(harness_dir: Path) -> None:
    """The run folder's parent can be created and written."""
    from harnessevolve.runs.rundir import STATE_DIR

    check_output_path(harness_dir / STATE_DIR / "runs", option="the harness's run folder", kind="folder")


def check_resume_belongs(run_root: Path, started: dict[str, Any], harness_dir: Path) -> None:
    """A run belongs to the harness it started on: resuming it on another would mix the two."""
    recorded = started.get("harness")
    beside = run_root.resolve().parent.parent.parent
    owner = Path(recorded).resolve() if isinstance(recorded, str) and recorded else beside
    if owner != harness_dir.resolve() or beside != harness_dir.resolve():
        other = owner if owner != harness_dir.resolve() else beside
        raise HarnessEvolveError(
            f"run {run_root.name} belongs to the harness {other}, not to {harness_dir}",
            file=str(run_root),
            field="--resume",
            hint=f"resume it with --harness {other}, or start a new run on {harness_dir}",
        )


SEED_SMOKE_TASKS = 2
"""Validation tasks the seed runs before the baseline (the baseline reuses them: no extra rollout)."""


async def smoke_seed(scorer: Any, seed: Harness, tasks: Sequence[Task]) -> None:
    """The seed harness runs its first ``SEED_SMOKE_TASKS`` tasks before the baseline; when its
    agent broke on every one of them (crashed, wrote no valid ATIF, flooded its output:
    ``BROKEN_AGENT_STOPS``) the run stops here, naming the seed as broken, instead of spending a
    validation pass and a generation and then blaming the first candidate. ``scorer`` is the run's
    (``scoring.scorer.Scorer``), so these rollouts are metered and memoised for the baseline."""
    chosen = list(tasks[:SEED_SMOKE_TASKS])
    if not chosen:
        return
    results = await scorer.score(seed, chosen, "seed harness: smoke check")
    stops = [r.trajectory.extra.get("stop_reason") for r in results]
    if not all(stop in BROKEN_AGENT_STOPS for stop in stops):
        return
    first = results[0].trajectory
    errors = [s.extra["error"] for s in first.steps if s.extra.get("error")]
    why = str(first.extra.get("error") or (errors[-1] if errors else stops[0]))
    why = " ".join(why.split())[:300]
    raise HarnessError(
        f"the seed harness is broken: its agent ended with {stops[0]} on all {len(results)} smoke "
        f"rollout(s) ({', '.join(r.task_id for r in results)}): {why}",
        file="harness.yaml",
        field="agent",
        hint="fix the seed's agent (run one task with `harnessevolve gate` or by hand) before evolving it",
    )
