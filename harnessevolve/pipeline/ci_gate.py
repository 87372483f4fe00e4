"""``harnessevolve gate``: judge a candidate revision of a harness against a baseline revision.

Both revisions are exported from git into temporary folders (the working tree is not touched),
scored on the same train minibatch and the held-out split, and passed through the same quality,
performance and held-out gates as ``run`` uses.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from harnessevolve.core.tasks import load_benchmark
from harnessevolve.execute.executor import EXECUTORS
from harnessevolve.gate.config import HeldoutConfig, load_gate_config
from harnessevolve.gate.performance import heldout_gate, performance_gate
from harnessevolve.gate.quality import quality_gate
from harnessevolve.gate.verdict import GateVerdict
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness
from harnessevolve.pipeline.loop import sample_batch
from harnessevolve.pipeline.references import load_references
from harnessevolve.pipeline.run import RunHooks, default_concurrency
from harnessevolve.pipeline.scoring import Scorer


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
    benchmark = load_benchmark(options.benchmark)
    references = load_references(benchmark)
    gates = load_gate_config(options.gates_file)
    with tempfile.TemporaryDirectory(prefix="he-gate-") as tmp:
        base_dir = repo.export(base_sha, Path(tmp) / "baseline")
        cand_dir = repo.export(cand_sha, Path(tmp) / "candidate")
        baseline = load_harness(base_dir)
        quality = quality_gate(cand_dir, baseline.files, baseline.editable, gates.quality)
        verdicts = [quality]
        if quality.passed:
            candidate = load_harness(cand_dir)
            scorer = Scorer(
                EXECUTORS["local"](default_concurrency(options.concurrency, options.model or baseline.model)),
                model=options.model,
                seed=options.seed,
                references=references,
                on_progress=hooks.on_progress,
            )
            batch = sample_batch(benchmark.split("train"), options.batch_size, options.seed, 1)
            held = benchmark.split(options.split)  # type: ignore[arg-type]

            async def score_all() -> list[list[float]]:
                out = []
                for harness, tasks, label in (
                    (baseline, batch, "baseline: train batch"),
                    (candidate, batch, "candidate: train batch"),
                    (baseline, held, f"baseline: {options.split}"),
                    (candidate, held, f"candidate: {options.split}"),
                ):
                    out.append([r.score for r in await scorer.score(harness, tasks, label)])
                return out

            base_batch, cand_batch, base_held, cand_held = asyncio.run(score_all())
            verdicts.append(performance_gate(base_batch, cand_batch, [], gates.performance))
            verdicts.append(
                heldout_gate(
                    base_held, cand_held, HeldoutConfig(split=options.split, max_drop=gates.heldout.max_drop)
                )
            )
    return GateReport(
        baseline=base_sha,
        candidate=cand_sha,
        verdicts=tuple(verdicts),
        extra={"benchmark": benchmark.name, "split": options.split, "gates": gates.source},
    )


def junit_xml(report: GateReport) -> str:
    suite = ET.Element(
        "testsuite",
        name="harnessevolve-gate",
        tests=str(len(report.verdicts)),
        failures=str(sum(not v.passed for v in report.verdicts)),
    )
    for verdict in report.verdicts:
        case = ET.SubElement(suite, "testcase", classname="harnessevolve.gate", name=verdict.gate)
        if not verdict.passed:
            failure = ET.SubElement(case, "failure", message=verdict.reason)
            failure.text = "\n".join(f"{k}: {v}" for k, v in verdict.numbers.items())
        out = ET.SubElement(case, "system-out")
        out.text = verdict.reason
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def markdown_summary(report: GateReport) -> str:
    status = "passed" if report.passed else "FAILED"
    lines = [
        f"### harnessevolve gate: {status}",
        "",
        f"Baseline `{report.baseline[:8]}` vs candidate `{report.candidate[:8]}`",
        "",
        "| gate | verdict | reason |",
        "|---|---|---|",
    ]
    lines += [f"| {v.gate} | {'pass' if v.passed else 'FAIL'} | {v.reason} |" for v in report.verdicts]
    return "\n".join(lines) + "\n"
