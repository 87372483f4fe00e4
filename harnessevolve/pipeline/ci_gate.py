"""``harnessevolve gate``: judge a candidate revision of a harness against a baseline revision.

Both revisions are exported from git into temporary folders (the working tree is not touched),
checked by the quality and leakage gates (leakage against every task of the benchmark), scored
on the same train minibatch and the held-out split, and passed through the same performance and
held-out gates as ``run`` uses. With ``performance.mode: sequential`` the performance gate runs
paired rollouts increment by increment until ``SequentialGate`` decides (pipeline/sequential.py).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.execute.executor import EXECUTORS
from harnessevolve.execute.sandbox import make_sandbox
from harnessevolve.gate.config import HeldoutConfig, load_gate_config
from harnessevolve.gate.leakage import leakage_gate
from harnessevolve.gate.performance import heldout_gate, mean, performance_gate, performance_verdict
from harnessevolve.gate.quality import quality_gate
from harnessevolve.gate.verdict import GateVerdict
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness, read_files
from harnessevolve.pipeline.loop import sample_batch
from harnessevolve.pipeline.references import load_references
from harnessevolve.pipeline.run import RunHooks, default_concurrency, parse_limits
from harnessevolve.pipeline.scoring import Scorer
from harnessevolve.pipeline.sequential import RepeatedScorer, repetitions, sequential_decision
from harnessevolve.runs.events import TestEvaluated
from harnessevolve.runs.ledger import Ledger
from harnessevolve.runs.rundir import STATE_DIR


@dataclass(frozen=True)
class GateOptions:
    harness_dir: Path
    baseline: str
    candidate: str
    benchmark: str
    split: str = "validation"
    model: str | None = None
    batch_size: int = 40
    concurrency: int | None = None
    seed: int = 0
    gates_file: Path | None = None
    sandbox: str = "bwrap"
    unsafe_no_sandbox: bool = False
    sandbox_limits: str | None = None


@dataclass(frozen=True)
class GateReport:
    baseline: str
    candidate: str
    verdicts: tuple[GateVerdict, ...]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "passed": self.passed,
            "verdicts": [v.to_dict() for v in self.verdicts],
            **self.extra,
        }


def run_gate(options: GateOptions, hooks: RunHooks) -> GateReport:
    repo = HarnessRepo(options.harness_dir)
    base_sha, cand_sha = repo.resolve(options.baseline), repo.resolve(options.candidate)
    benchmark = load_benchmark_spec(options.benchmark)
    references = load_references(benchmark)
    gates = load_gate_config(options.gates_file)
    with tempfile.TemporaryDirectory(prefix="he-gate-") as tmp:
        base_dir = repo.export(base_sha, Path(tmp) / "baseline")
        cand_dir = repo.export(cand_sha, Path(tmp) / "candidate")
        baseline = load_harness(base_dir)
        quality = quality_gate(cand_dir, baseline.files, baseline.editable, gates.quality)
        leakage = leakage_gate(baseline.files, read_files(cand_dir), benchmark.tasks, gates.leakage)
        verdicts = [quality, leakage]
        if quality.passed and leakage.passed:
            candidate = load_harness(cand_dir)
            scorer = Scorer(
                EXECUTORS["local"](
                    default_concurrency(options.concurrency, options.model or baseline.model),
                    make_sandbox(
                        options.sandbox,
                        limits=parse_limits(options.sandbox_limits),
                        unsafe=options.unsafe_no_sandbox,
                    ),
                ),
                model=options.model,
                seed=options.seed,
                references=references,
                on_progress=hooks.on_progress,
            )
            train = benchmark.split("train")
            batch = sample_batch(train, options.batch_size, options.seed, 1)
            held = benchmark.split(options.split)  # type: ignore[arg-type]
            perf_config = gates.performance

            async def score_all() -> tuple[GateVerdict, list[float], list[float]]:
                if perf_config.mode == "sequential":
                    # deterministic harnesses run each task once: give them the whole train split
                    stochastic = repetitions(baseline, candidate, perf_config) > 1
                    pool = batch if stochastic else list(train)
                    decision = await sequential_decision(
                        RepeatedScorer(scorer),
                        baseline,
                        candidate,
                        pool,
                        perf_config,
                        seed=options.seed,
                        label="train",
                    )
                    performance = performance_verdict(decision, [], perf_config)
                else:
                    base_batch = [
                        r.score for r in await scorer.score(baseline, batch, "baseline: train batch")
                    ]
                    cand_batch = [
                        r.score for r in await scorer.score(candidate, batch, "candidate: train batch")
                    ]
                    ids = [t.id for t in batch]
                    performance = performance_gate(base_batch, cand_batch, [], perf_config, ids)
                base_held = [
                    r.score for r in await scorer.score(baseline, held, f"baseline: {options.split}")
                ]
                cand_held = [
                    r.score for r in await scorer.score(candidate, held, f"candidate: {options.split}")
                ]
                return performance, base_held, cand_held

            performance, base_held, cand_held = asyncio.run(score_all())
            if options.split == "test":
                record_sealed_test(repo, benchmark.name, base_sha, cand_sha, base_held, cand_held)
            verdicts.append(performance)
            verdicts.append(
                heldout_gate(
                    base_held,
                    cand_held,
                    HeldoutConfig(split=options.split, max_drop=gates.heldout.max_drop),
                    confidence=perf_config.confidence,
                    task_ids=[t.id for t in held],
                )
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
        },
    )


def _pct(level: Any) -> str:
    return f"{100 * float(level):g}%"


def _ci(values: Any, level: Any) -> str:
    if not values:
        return ""
    return f" ({_pct(level)} CI {values[0]:+.3f} to {values[1]:+.3f})"


def verdict_headline(verdict: GateVerdict) -> str:
    """The numbers behind a verdict in one line, confidence intervals included."""
    n = verdict.numbers
    if verdict.gate == "quality" and "prompt_chars" in n:
        return (
            f"prompt {n['prompt_chars']}/{n['max_prompt_chars']} chars; "
            f"{n['new_examples']}/{n['max_new_examples']} new examples; {len(n['changed'])} file(s) changed"
        )
    if verdict.gate == "leakage" and "max_score" in n:
        worst = f" ({n['max_task']})" if n.get("max_task") else ""
        text = (
            f"max score {n['max_score']:.2f}{worst}, threshold {n['threshold']}; "
            f"{n['added_words']} words added"
        )
        if n.get("train_demonstrations"):
            text += f"; train demonstrations: {', '.join(n['train_demonstrations'])}"
        if "judge_score" in n:
            text += f"; judge {n['judge_model']}: {n['judge_score']:.2f}"
        return text
    if verdict.gate == "performance" and "gain" in n:
        text = (
            f"{n['current']:.3f} -> {n['candidate']:.3f}, gain {n['gain']:+.3f}"
            f"{_ci(n.get('gain_ci'), n['confidence'])}; "
            f"wins {n['wins']}, losses {n['losses']}, ties {n['ties']}"
        )
        if n["mode"] == "sequential":
            text += (
                f"; {n['pairs']} pairs ({n['rollouts']} rollouts), log LR {n['llr']:.2f} "
                f"(accept >= {n['accept_at']:.2f}, reject <= {n['reject_at']:.2f})"
            )
        else:
            text += f"; one-sided McNemar p = {n['p_value']:.3g}"
        if n.get("recent_drops"):
            text += f"; recent drops {n['recent_drops']} (max {n['max_recent_drop']})"
        return text
    if verdict.gate == "heldout" and "drop" in n:
        return (
            f"{n['split']} {n['current']:.3f} -> {n['candidate']:.3f}, drop {n['drop']:+.3f}"
            f"{_ci(n.get('drop_ci'), n.get('confidence', 0.95))}, max {n['max_drop']}; {n['tasks']} tasks"
        )
    return ", ".join(f"{k} {v}" for k, v in n.items() if not isinstance(v, list | dict))


def _number_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


SEALED_TEST_LEDGER = "sealed-test.jsonl"


def record_sealed_test(
    repo: HarnessRepo, benchmark: str, baseline: str, candidate: str, base: list[float], cand: list[float]
) -> None:
    """Every look at the sealed test split outside a run goes to ``DIR/.harnessevolve/sealed-test.jsonl``."""
    ledger = Ledger(repo.dir / STATE_DIR / SEALED_TEST_LEDGER)
    ledger.append(
        TestEvaluated(
            source="gate",
            benchmark=benchmark,
            tasks=len(base),
            revisions={"baseline": baseline, "candidate": candidate},
            scores={"baseline": round(mean(base), 4), "candidate": round(mean(cand), 4)},
        )
    )
    ledger.close()


def junit_xml(report: GateReport) -> str:
    suite = ET.Element(
        "testsuite",
        name="harnessevolve-gate",
        tests=str(len(report.verdicts)),
        failures=str(sum(not v.passed for v in report.verdicts)),
    )
    for verdict in report.verdicts:
        case = ET.SubElement(suite, "testcase", classname="harnessevolve.gate", name=verdict.gate)
        properties = ET.SubElement(case, "properties")
        for key, value in verdict.numbers.items():
            ET.SubElement(properties, "property", name=key, value=_number_text(value))
        if not verdict.passed:
            failure = ET.SubElement(case, "failure", message=verdict.reason)
            failure.text = "\n".join(f"{k}: {_number_text(v)}" for k, v in verdict.numbers.items())
        out = ET.SubElement(case, "system-out")
        out.text = f"{verdict.reason}\n{verdict_headline(verdict)}"
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_summary(report: GateReport) -> str:
    status = "passed" if report.passed else "FAILED"
    where = f" on `{report.extra['benchmark']}`" if "benchmark" in report.extra else ""
    lines = [
        f"### harnessevolve gate: {status}",
        "",
        f"Baseline `{report.baseline[:8]}` vs candidate `{report.candidate[:8]}`{where}",
        "",
        "| gate | verdict | reason | numbers |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {v.gate} | {'pass' if v.passed else 'FAIL'} | {_cell(v.reason)} | {_cell(verdict_headline(v))} |"
        for v in report.verdicts
    ]
    lines += ["", "<details><summary>All gate numbers</summary>", ""]
    for v in report.verdicts:
        lines.append(
            f"- **{v.gate}**: " + ", ".join(f"{k} `{_number_text(x)}`" for k, x in v.numbers.items())
        )
    lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
