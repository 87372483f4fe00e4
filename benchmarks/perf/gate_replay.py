"""Replays the gate decisions of finished runs under other gates files: for every candidate a run
judged past the quality gate, the paired outcomes the run already scored (its batch, the recent
batches and validation, read from the run's ``evaluations/<harness hash>/``) are weighed by the
default pooled decision, the sign test alone and the fixed rule, beside what the run decided.
No model is called. A decision that differs changes what the run would have done next, which a
replay cannot know: each row is one decision, not a counterfactual run.

    .venv/bin/python benchmarks/perf/gate_replay.py \\
        benchmarks/perf/results/*/cells/evolve/seed-*/work/harness \\
        --json benchmarks/perf/results/gate_replay.json

Only the runs that kept their work folder can be replayed (compare keeps ``work/`` beside each
evolve cell's result; the folder is not committed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pooled_gate_simulation import fixed_accepts  # this folder's script

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.gate.config import load_gate_config
from harnessevolve.gate.noise import Pair, decide_pooled
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.load import load_harness

GATES = {"default (pooled + unopposed)": None, "sign test alone": "pooled", "fixed rule": "fixed"}


def scores(run: Path, harness_hash: str, tasks: list[str]) -> list[float] | None:
    out = []
    for task in tasks:
        path = run / "evaluations" / harness_hash / f"{task}.json"
        if not path.is_file():
            return None
        out.append(float(json.loads(path.read_text())["score"]))
    return out


def decide(name: str | None, batch: list[Pair], recent: list[list[Pair]], val: list[Pair]) -> bool:
    config = load_gate_config(Path(name) if name else None)
    if config.performance.mode == "fixed":
        return fixed_accepts(config, batch, recent, val)  # the simulation's, the package's own gates
    evidence = {"batch": batch, "recent": [p for r in recent for p in r], "validation": val}
    return decide_pooled(evidence, config.performance, ci_resamples=0).accepted


def label(harness_dir: Path) -> str:
    """``TABLE ARM seed-N`` for a compare cell's harness (``TABLE/cells/ARM/seed-N/work/harness``)."""
    parts = harness_dir.resolve().parts
    if len(parts) >= 6 and parts[-2] == "work" and parts[-5] == "cells":
        return f"{parts[-6]} {parts[-4]} {parts[-3]}"
    return str(harness_dir)


def replay(harness_dir: Path) -> list[dict[str, Any]]:
    repo = HarnessRepo(harness_dir)
    rows: list[dict[str, Any]] = []
    for run in sorted((harness_dir / ".harnessevolve" / "runs").iterdir()):
        events = [
            json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines() if line.strip()
        ]
        started = next(e for e in events if e["event"] == "run_started")
        benchmark = load_benchmark_spec(
            started["options"]["benchmark"], tuple(started["options"].get("adapters") or ())
        )
        val_tasks = [t.id for t in benchmark.split("validation")]
        batches: dict[int, tuple[str, list[str]]] = {}
        for e in events:
            if e["event"] == "batch_evaluated":
                batches[e["generation"]] = (e["harness_hash"], e["tasks"])
            if e["event"] not in ("candidate_accepted", "candidate_reverted", "candidate_rejected"):
                continue
            generation = e["generation"]
            current, tasks = batches[generation]
            val_only = [t for t in val_tasks if t not in tasks]
            candidate = e.get("harness_hash")
            if candidate is None and e.get("sha"):
                with tempfile.TemporaryDirectory() as tmp:
                    candidate = load_harness(repo.export(e["sha"], Path(tmp) / "h")).content_hash()
            if candidate is None:
                continue
            pairs = {}
            for split, ids in (("batch", tasks), ("validation", val_only)):
                cur, can = scores(run, current, ids), scores(run, candidate, ids)
                pairs[split] = (
                    [Pair(t, a, b) for t, a, b in zip(ids, cur, can, strict=True)] if cur and can else []
                )
            recent: list[list[Pair]] = []
            for g in range(max(1, generation - 2), generation):
                ids = batches.get(g, ("", []))[1]
                cur, can = scores(run, current, ids), scores(run, candidate, ids)
                if cur and can:
                    recent.append([Pair(t, a, b) for t, a, b in zip(ids, cur, can, strict=True)])
            if not pairs["batch"]:
                continue  # refused before its batch was scored (quality, leakage, smoke)
            every = pairs["batch"] + [p for r in recent for p in r] + pairs["validation"]
            rows.append(
                {
                    "run": label(harness_dir),
                    "generation": generation,
                    "summary": next(
                        (
                            x["summary"]
                            for x in reversed(events[: events.index(e)])
                            if x["event"] == "candidate_committed"
                        ),
                        "",
                    ),
                    "decided": "accepted" if e["event"] == "candidate_accepted" else "refused",
                    "wins": sum(p.sign > 0 for p in every),
                    "losses": sum(p.sign < 0 for p in every),
                    "pairs": len(every),
                    "validation_scored": bool(pairs["validation"]),
                    **{
                        label: decide(name, pairs["batch"], recent, pairs["validation"])
                        for label, name in GATES.items()
                    },
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("harness", nargs="*", type=Path, help="harness folders whose runs to replay")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--smoke", action="store_true", help="replay a 2-generation scripted run made on the spot (seconds)"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        with tempfile.TemporaryDirectory() as tmp:
            return report(replay(smoke_run(Path(tmp))), None)
    if not args.harness:
        parser.error("name at least one harness folder (or --smoke)")
    return report([row for folder in args.harness for row in replay(folder)], args.json)


def smoke_run(tmp: Path) -> Path:
    """A harness folder with one finished run: the shell-agent template, 2 generations of the
    scripted learner on shell-basics."""
    harness = tmp / "h"
    for command in (
        ["init", str(harness)],
        ["run", "-H", str(harness), "-b", "shell-basics", "-n", "2", "--batch-size", "4"]
        + ["-m", "scripted/policy:learner"],
    ):
        subprocess.run([sys.executable, "-m", "harnessevolve", *command], capture_output=True, check=False)
    return harness


def report(rows: list[dict[str, Any]], out: Path | None) -> int:
    print("| run | gen | candidate | the run | wins / losses (pairs) | " + " | ".join(GATES) + " |")
    print("|---|---|---|---|---|" + "---|" * len(GATES))
    for r in rows:
        marks = " | ".join("accept" if r[label] else "refuse" for label in GATES)
        counts = f"{r['wins']} / {r['losses']} ({r['pairs']})"
        cells = f"{r['run']} | {r['generation']} | {r['summary'][:60]} | {r['decided']}"
        print(f"| {cells} | {counts} | {marks} |")
    agree = {label: sum(r[label] == (r["decided"] == "accepted") for r in rows) for label in GATES}
    print(f"{len(rows)} decisions; agree with the run: " + ", ".join(f"{k} {v}" for k, v in agree.items()))
    if out is not None:
        doc = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "load_average": list(os.getloadavg()),
            "decisions": rows,
        }
        out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
