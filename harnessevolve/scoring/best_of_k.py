"""The matched-budget control: the seed harness's best-of-k at the rollouts a run spent.

A run spends B rollouts (``run_finished.rollouts`` + ``cached_rollouts``: every rollout the run
used to reach its final harness, the ones the cache served included) to turn the seed into the
evolved harness. Plain sampling could have spent the same B on the seed itself: k = round(B / T)
samples of each of the T test tasks. *Matched* means exactly this: the control's samples equal the
run's own rollout count (to rounding), so "evolved beats the seed" becomes "evolution beat
spending its budget on sampling". Two scores of the k samples per task:

- ``sc`` (self-consistency): one sample picked per task *without the checker* -- among the samples
  that ended by submitting (all if none did), the largest group of identical action sequences,
  the earliest breaking ties. Deployable: it is what a user could ship.
- ``oracle`` (pass@k): a task counts as solved when any sample passes. Not deployable (it needs
  the checker at pick time); an upper bound, always labelled as the oracle.

Samples: the first is the seed's own test rollout, at the seed's own settings (already run to
score the seed: no new rollout); the other k - 1 run the seed at ``temperature`` (default 0.7
when the seed is greedy, else the seed's own) with seeds ``seed + j``. Every sample goes through
the rollout cache, so re-running ``report --final`` costs nothing, and the control adds at most
k - 1 test passes: at most one extra test pass per sample of k.
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harnessevolve.core.documents import bounded_yaml
from harnessevolve.core.tasks import Task
from harnessevolve.gate.noise import Pair, mean_ci, paired_gain_ci
from harnessevolve.harness.load import load_harness
from harnessevolve.harness.model import Harness
from harnessevolve.scoring.scorer import TaskResult
from harnessevolve.scoring.sequential import RepetitionScorer

DEFAULT_TEMPERATURE = 0.7
"""Sampling temperature of the control when the seed harness itself is greedy (temperature 0)."""
COPY_IGNORED = shutil.ignore_patterns(".git", ".harnessevolve", "__pycache__")


def matched_k(rollouts: int, tasks: int) -> int:
    """k = round(rollouts / tasks), at least 1: the samples per task that spend ``rollouts``."""
    return max(1, round(rollouts / tasks)) if tasks else 1


def action_key(result: TaskResult) -> str:
    return json.dumps(
        [[c.function_name, c.arguments] for s in result.trajectory.agent_steps for c in s.tool_calls],
        sort_keys=True,
    )


def self_consistent_pick(samples: Sequence[TaskResult]) -> TaskResult:
    """One sample chosen without the checker: among runs that ended by submitting (all runs if none
    did), the largest group of identical action sequences; the earliest sample breaks ties."""
    pool = [s for s in samples if s.trajectory.extra.get("stop_reason") == "submitted"] or list(samples)
    counts = Counter(action_key(s) for s in pool)
    top = max(counts.values())
    return next(s for s in pool if counts[action_key(s)] == top)


def sampling_harness(source: Path, dest: Path, temperature: float) -> Harness:
    """A copy of the harness at ``source`` (its files only) sampling at ``temperature``."""
    shutil.copytree(source, dest, ignore=COPY_IGNORED)
    doc = bounded_yaml((dest / "harness.yaml").read_text(encoding="utf-8"))
    doc.setdefault("loop", {})["temperature"] = temperature
    (dest / "harness.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return load_harness(dest)


@dataclass(frozen=True)
class BestOfK:
    """k samples per task of the seed, and what they score."""

    k: int
    temperature: float
    task_ids: tuple[str, ...]
    sc_scores: tuple[float, ...]
    """Per task (in ``task_ids`` order): the score of the self-consistent pick."""
    oracle_scores: tuple[float, ...]
    """Per task: the best score of any sample (pass@k)."""
    pass1: float
    """The mean single-sample score."""
    samples: int
    """k x tasks."""
    new_rollouts: int
    """Samples actually run now (the rest came from the seed's own rollouts or the cache)."""
    infra: int
    """Samples that failed on the machine (scored 0, counted here apart)."""
    matched_to: int | None = None
    """The run's rollouts k was matched to; None when k was given by hand (not matched)."""
    confidence: float = 0.95

    @property
    def sc(self) -> float:
        return statistics.fmean(self.sc_scores) if self.sc_scores else 0.0

    @property
    def oracle(self) -> float:
        return statistics.fmean(self.oracle_scores) if self.oracle_scores else 0.0

    def arms(self) -> dict[str, float]:
        """``sc``, ``pass@k`` and ``pass@1``: the best-of-k rows of benchmarks/perf."""
        return {"sc": self.sc, "pass@k": self.oracle, "pass@1": self.pass1}

    def gain_over_sc(self, evolved: Sequence[float]) -> tuple[float, tuple[float, float] | None]:
        """Evolved minus the control's pick, per task paired, with its bootstrap interval."""
        pairs = [Pair(t, c, e) for t, c, e in zip(self.task_ids, self.sc_scores, evolved, strict=True)]
        gain = statistics.fmean(p.candidate - p.current for p in pairs) if pairs else 0.0
        return round(gain, 4), paired_gain_ci(pairs, self.confidence)

    def to_dict(self) -> dict[str, Any]:
        sc_ci = mean_ci(self.sc_scores, self.confidence)
        oracle_ci = mean_ci(self.oracle_scores, self.confidence)
        return {
            "k": self.k,
            "matched_to": self.matched_to,
            "temperature": self.temperature,
            "tasks": len(self.task_ids),
            "sc": round(self.sc, 4),
            "sc_ci": list(sc_ci) if sc_ci else None,
            "oracle": round(self.oracle, 4),
            "oracle_ci": list(oracle_ci) if oracle_ci else None,
            "pass1": round(self.pass1, 4),
            "samples": self.samples,
            "new_rollouts": self.new_rollouts,
            "infra": self.infra,
            "confidence": self.confidence,
        }


async def best_of_k(
    scorer: RepetitionScorer,
    sampler: Harness,
    tasks: Sequence[Task],
    k: int,
    label: str,
    *,
    first: Sequence[TaskResult] | None = None,
    matched_to: int | None = None,
    confidence: float = 0.95,
) -> BestOfK:
    """``k`` samples per task: ``first`` (the seed's own results on ``tasks``, when given) as
    sample 1, then ``sampler`` at repetitions 1.. (or 0.. without ``first``) of ``scorer``."""
    if k < 1:
        raise ValueError("k must be at least 1")
    before = scorer.rollouts
    samples: list[list[TaskResult]] = [list(first)] if first is not None else []
    for j in range(len(samples), k):
        samples.append(await scorer.score(sampler, tasks, f"{label} sample {j + 1}/{k}", repetition=j))
    per_task = list(zip(*samples, strict=True))
    return BestOfK(
        k=k,
        temperature=sampler.loop.temperature,
        task_ids=tuple(t.id for t in tasks),
        sc_scores=tuple(self_consistent_pick(s).score for s in per_task),
        oracle_scores=tuple(max(r.score for r in s) for s in per_task),
        pass1=statistics.fmean(statistics.fmean(r.score for r in s) for s in per_task) if per_task else 0.0,
        samples=k * len(tasks),
        new_rollouts=scorer.rollouts - before,
        infra=sum(1 for s in samples for r in s if r.infra),
        matched_to=matched_to,
        confidence=confidence,
    )


async def seed_control(
    scorer: Any,
    seed: Harness,
    tasks: Sequence[Task],
    seed_results: Sequence[TaskResult],
    *,
    k: int,
    matched_to: int | None,
    work_dir: Path,
    temperature: float | None = None,
) -> BestOfK:
    """The control of ``report --final`` and ``gate --split test``: ``seed``'s best-of-``k`` on
    ``tasks``, its own results (``seed_results``) as the first sample. ``scorer`` is the ``Scorer``
    that scored the seed (its cache and executor serve the samples)."""
    from harnessevolve.scoring.sequential import RepeatedScorer

    if temperature is None and seed.loop.temperature > 0:
        sampler = seed
    else:
        sampler = sampling_harness(
            seed.root,
            work_dir / "control-sampler",
            DEFAULT_TEMPERATURE if temperature is None else temperature,  # 0 is a temperature too
        )
    return await best_of_k(
        RepeatedScorer(scorer),
        sampler,
        tasks,
        k,
        "control: seed best-of-k",
        first=seed_results,
        matched_to=matched_to,
    )
