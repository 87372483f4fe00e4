"""``harnessevolve gate``: judge a candidate revision of a harness against a baseline revision.

Both revisions are exported from git into temporary folders (the working tree is not touched) and
judged by the very ``CandidateJudge`` that ``run`` uses: the quality gate (schemas, editable
paths, size), leakage against every task of the benchmark, a one-task smoke run, the performance
gate on the same train minibatch (fixed, or sequential until ``SequentialGate`` decides), then
the held-out gate on ``--split``. Unlike a run, the held-out gate is scored even after a failed
performance gate, so the CI report carries every number. The rollouts run in the executor and
sandbox of ``scoring/build.py``, the set-up ``run`` and ``report --final`` use too.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.files import atomic_write_json
from harnessevolve.core.tasks import Task
from harnessevolve.gate.config import GateConfig, load_gate_config
from harnessevolve.gate.performance import mean
from harnessevolve.gate.verdict import GateVerdict
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.harness.model import Harness
from harnessevolve.judging.judge import CandidateJudge
from harnessevolve.pipeline import preflight
from harnessevolve.pipeline.final import control_numbers
from harnessevolve.pipeline.loop import sample_batch
from harnessevolve.pipeline.state import RunHooks
from harnessevolve.report.gate_report import GateReport
from harnessevolve.runs.events import TestEvaluated
from harnessevolve.runs.ledger import Ledger
from harnessevolve.runs.run_config import ExecutionConfig
from harnessevolve.runs.rundir import STATE_DIR, RunDir
from harnessevolve.runs.tempdirs import run_tempdir
from harnessevolve.scoring.best_of_k import matched_k, seed_control
from harnessevolve.scoring.build import build_scorer
from harnessevolve.scoring.references import load_references
from harnessevolve.scoring.scorer import Scorer


@dataclass(frozen=True)
class GateOptions:
    harness_dir: Path
    baseline: str
    candidate: str
    benchmark: str
    split: str = "validation"
    model: str | None = None
    batch_size: int = 40
    seed: int = 0
    gates_file: Path | None = None
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    """Where and how rollouts run: the same section as a run's (``RunConfig.execution``)."""
    adapters: tuple[str, ...] = ()
    """``module:attr`` adapters to load the benchmark with (``--adapter``)."""
    require_control: bool = False
    """``--split test``: fail unless the candidate beats the baseline's matched best-of-k (also
    ``heldout.require_control`` in the gates file)."""
    control_k: int | None = None
    """Samples per test task of the control; None: matched to the rollouts of the run that ended
    at the candidate (found in the harness's runs)."""


def regression_check(gates: GateConfig) -> GateConfig:
    """The gates ``gate`` judges a change with. A run's pooled decision asks whether a candidate
    is shown *better*; a CI gate asks whether a change is *no worse*, so under ``mode: pooled`` it
    checks the batch (gain >= ``min_gain``, 0) and the held-out drop (<= ``heldout.max_drop``) as
    the fixed rule does, and a change that neither gains nor loses passes. Fixed and sequential
    gates files are used as written."""
    if gates.performance.mode != "pooled":
        return gates
    return replace(gates, performance=replace(gates.performance, mode="fixed"))


def run_gate(options: GateOptions, hooks: RunHooks) -> GateReport:
    repo = HarnessRepo(options.harness_dir)
    base_sha, cand_sha = repo.resolve(options.baseline), repo.resolve(options.candidate)
    benchmark = load_benchmark_spec(options.benchmark, options.adapters)
    written = load_gate_config(options.gates_file)
    gates = regression_check(written)
    # every temp folder in one per-process folder: a killed gate leaves nothing for long
    with run_tempdir("gate"), tempfile.TemporaryDirectory(prefix="he-gate-") as tmp:
        baseline = load_harness(repo.export(base_sha, Path(tmp) / "baseline"))
        preflight.check_benchmark(benchmark, gates, options.split)
        preflight.check_models(options.model or baseline.model, None, gates)
        cand_dir = repo.export(cand_sha, Path(tmp) / "candidate")
        # a look at the sealed test split keeps what it saw, as a run keeps its splits' rollouts
        kept = kept_folder(repo, base_sha, cand_sha) if options.split == "test" else None
        scorer = build_scorer(
            options.execution,
            benchmark=benchmark,
            model=options.model,
            default_model=baseline.model,
            seed=options.seed,
            references=load_references(benchmark),
            on_progress=hooks.on_progress,
            out_dir=kept,
        )
        judge = CandidateJudge(
            benchmark=benchmark,
            scorer=scorer,
            gates=gates,
            ledger=None,
            seed=options.seed,
            heldout_split=options.split,
            keep_going=True,
            refuse_ties=False,  # in CI a change that neither gains nor loses is no regression
        )
        batch = sample_batch(benchmark.split("train"), options.batch_size, options.seed, 1)

        async def judge_candidate() -> list[GateVerdict]:
            judgement = await judge.screen(baseline, cand_dir, batch[0], "candidate")
            if judgement.screened:
                judgement = await judge.evaluate(baseline, judgement, batch, [], 1, "candidate")
            return judgement.verdicts

        verdicts = list(asyncio.run(judge_candidate()))
        control_note: dict[str, Any] | None = None
        if options.split == "test":
            require = options.require_control or gates.heldout.require_control
            k, matched_to, why = gate_control_k(options, cand_sha, len(benchmark.split("test")))
            if k:
                candidate_harness = load_harness(cand_dir)
                verdicts.append(
                    asyncio.run(
                        control_verdict(
                            scorer,
                            baseline,
                            candidate_harness,
                            list(benchmark.split("test")),
                            k,
                            matched_to,
                            require,
                            Path(tmp),
                        )
                    )
                )
            else:
                control_note = {"skipped": why}
        heldout = next((v for v in verdicts if v.gate == "heldout"), None)
        if options.split == "test" and heldout is not None:
            numbers = heldout.numbers
            if kept is not None:
                harnesses = {"baseline": baseline, "candidate": load_harness(cand_dir)}
                revisions = {"baseline": base_sha, "candidate": cand_sha}
                tests = list(benchmark.split("test"))
                asyncio.run(keep_outcomes(scorer, harnesses, revisions, tests, kept))
            record_sealed_test(
                repo,
                benchmark.name,
                base_sha,
                cand_sha,
                numbers["tasks"],
                numbers["current"],
                numbers["candidate"],
                control=next((v.numbers for v in verdicts if v.gate == "control"), None),
                kept=kept,
            )
    return GateReport(
        baseline=base_sha,
        candidate=cand_sha,
        verdicts=tuple(verdicts),
        extra={
            "benchmark": benchmark.name,
            "split": options.split,
            "gates": gates.source,
            "performance_mode": gates.performance.mode,
            # a pooled gates file is judged as a regression check (regression_check)
            **({"gates_mode": written.performance.mode} if written is not gates else {}),
            **({"control": control_note} if control_note else {}),
            **({"kept": str(kept)} if kept is not None and kept.is_dir() else {}),
        },
    )


KEPT_DIR = "gates"
"""``DIR/.harnessevolve/gates/<UTC time>-<baseline>-<candidate>/``: what a ``gate --split test`` saw."""


def kept_folder(repo: HarnessRepo, baseline: str, candidate: str) -> Path:
    """A new folder for one look at the test split (made when the first rollout is saved)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return repo.dir / STATE_DIR / KEPT_DIR / f"{stamp}-{baseline[:8]}-{candidate[:8]}"


async def keep_outcomes(
    scorer: Scorer,
    harnesses: dict[str, Harness],
    revisions: dict[str, str],
    tests: list[Task],
    folder: Path,
) -> None:
    """``outcomes.json`` in ``folder``: per revision, its harness hash (the name of its folders
    under ``trajectories/`` and ``evaluations/``, written by the scorer) and each test task's score,
    pass and stop reason. The held-out gate scored them already: these come from the scorer's memo."""
    doc: dict[str, Any] = {"split": "test", "revisions": {}}
    for name, harness in harnesses.items():
        results = await scorer.score(harness, tests, f"test split: {name}")
        doc["revisions"][name] = {
            "revision": revisions[name],
            "harness_hash": harness.content_hash(),
            "score": round(mean([r.score for r in results]), 4),
            "tasks": {
                r.task_id: {
                    "score": r.score,
                    "passed": r.passed,
                    "stop_reason": r.trajectory.extra.get("stop_reason"),
                    **({"infra": r.infra} if r.infra else {}),
                }
                for r in results
            },
        }
    atomic_write_json(folder / "outcomes.json", doc)


def gate_control_k(options: GateOptions, candidate: str, tasks: int) -> tuple[int, int | None, str]:
    """(k, matched_to, why-skipped): ``--control-k``, else matched to the run that ended at
    ``candidate``; a required control that cannot be matched is bad input."""
    if options.control_k is not None:
        return options.control_k, None, "--control-k 0"
    record = RunDir.ending_at(options.harness_dir, candidate)
    if record is not None and record.rollouts is not None:
        return matched_k(record.rollouts, tasks), record.rollouts, ""
    why = f"no finished run of this harness ends at {candidate[:8]}: nothing to match the control to"
    if options.require_control:
        raise HarnessEvolveError(
            why, field="--require-control", hint="give the samples per test task with --control-k K"
        )
    return 0, None, why + " (--control-k K scores it)"


async def control_verdict(
    scorer: Scorer,
    baseline: Harness,
    candidate: Harness,
    tests: list[Task],
    k: int,
    matched_to: int | None,
    required: bool,
    work_dir: Path,
) -> GateVerdict:
    """The ``control`` gate: does the candidate beat the baseline's best-of-k (self-consistency
    pick) on the test split? It fails the gate only when ``required``."""
    base = await scorer.score(baseline, tests, "test split: baseline")  # the held-out gate's, memoised
    cand = await scorer.score(candidate, tests, "test split: candidate")
    best = await seed_control(scorer, baseline, tests, base, k=k, matched_to=matched_to, work_dir=work_dir)
    numbers = {
        **control_numbers(best, [r.score for r in cand]),
        "candidate": round(mean([r.score for r in cand]), 4),
        "baseline": round(mean([r.score for r in base]), 4),
        "required": required,
    }
    beats = numbers["evolved_minus_sc"] > 0
    label = f"baseline best-of-{k} (sc) {best.sc:.3f}" + ("" if matched_to is not None else ", k not matched")
    if beats:
        reason = f"candidate {numbers['candidate']:.3f} beats the {label}"
    else:
        reason = f"candidate {numbers['candidate']:.3f} does not beat the {label}" + (
            "" if required else " (not required)"
        )
    return GateVerdict("control", beats or not required, reason, numbers)


SEALED_TEST_LEDGER = "sealed-test.jsonl"


def record_sealed_test(
    repo: HarnessRepo,
    benchmark: str,
    baseline: str,
    candidate: str,
    tasks: int,
    base: float,
    cand: float,
    *,
    control: dict[str, Any] | None = None,
    kept: Path | None = None,
) -> None:
    """Every look at the sealed test split outside a run goes to ``DIR/.harnessevolve/sealed-test.jsonl``
    (``kept``: the folder of its per-task outcomes and trajectories, named relative to ``DIR``)."""
    ledger = Ledger(repo.dir / STATE_DIR / SEALED_TEST_LEDGER)
    ledger.append(
        TestEvaluated(
            source="gate",
            benchmark=benchmark,
            tasks=tasks,
            revisions={"baseline": baseline, "candidate": candidate},
            scores={"baseline": round(base, 4), "candidate": round(cand, 4)},
            control=control,
            kept=str(kept.relative_to(repo.dir)) if kept is not None and kept.is_dir() else None,
        )
    )
    ledger.close()
