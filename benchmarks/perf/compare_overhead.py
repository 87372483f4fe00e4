"""What ``harnessevolve compare`` costs over the runs it wraps (target: at most 5% of wall time).

Side by side in one process, alternating, ``--repeats`` times: the same evolve cell and seed cell
made (a) by ``compare`` (plan checked, identities hashed, result files written, the table built)
and (b) by hand with the same package functions a cell calls (the seed harness copied into a git
repository, ``start_run`` with the same options, the final and the seed harness scored on the test
split with a fresh rollout cache). Prints the medians and their ratio, with the load average, and
writes them as JSON.

    .venv/bin/python benchmarks/perf/compare_overhead.py --json benchmarks/perf/results/compare_overhead.json

The default agent is the scripted learner (no model file; rollouts are real sandboxed commands),
so the figure is compare's fixed cost against short cells: an upper bound for real-model cells,
whose runs take minutes to hours while compare's own work stays the same.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.compare.evolve_cell import copy_seed, run_config
from harnessevolve.compare.plan import load_plan
from harnessevolve.compare.runner import run_comparison
from harnessevolve.core.interrupts import run_async
from harnessevolve.harness.load import load_harness
from harnessevolve.pipeline.run import start_run
from harnessevolve.pipeline.state import RunHooks
from harnessevolve.scoring.build import build_scorer
from harnessevolve.scoring.references import load_references
from harnessevolve.scoring.rollout_cache import RolloutCache

TARGET = 1.05


def write_plan(folder: Path, args: argparse.Namespace) -> Path:
    doc = {
        "version": 1,
        "model": args.model,
        "benchmark": args.benchmark,
        "harness": {"template": args.template},
        "seeds": [0],
        "arms": [
            {"kind": "seed"},
            {
                "name": "evolve",
                "kind": "evolve",
                "options": {"generations": args.generations, "batch_size": 8},
            },
        ],
    }
    path = folder / "plan.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def by_compare(plan_file: Path, out: Path) -> float:
    began = time.perf_counter()
    plan = load_plan(plan_file)
    run_comparison(plan, out)
    return time.perf_counter() - began


def by_hand(plan_file: Path, work: Path) -> float:
    """The cells' work without compare, as a script would do it: ``run``, then the benchmark
    loaded again to score the seed and the final harness on test (as ``gate --split test`` does).
    The plan is read only for its values (not timed)."""
    plan = load_plan(plan_file)
    arm = plan.arm("evolve")
    began = time.perf_counter()
    harness_dir = copy_seed(plan.harness.path, work / "harness")
    start_run(run_config(plan, arm, 0, harness_dir), RunHooks())
    suite = load_benchmark_spec(plan.benchmark)
    scorer = build_scorer(
        plan.execution,
        benchmark=suite,
        model=plan.model,
        default_model=plan.model,
        seed=0,
        references=load_references(suite),
        out_dir=work / "test",
        cache=RolloutCache(work / "cache"),
    )
    tests = suite.split("test")
    for harness in (load_harness(plan.harness.path), load_harness(harness_dir)):
        run_async(scorer.score(harness, tests, "test"))
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="scripted/policy:learner")
    parser.add_argument("--benchmark", default="subset:validation=8,test=8@shell-basics")
    parser.add_argument("--template", default="shell-agent")
    parser.add_argument("--generations", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--smoke", action="store_true", help="one repeat of one generation: a check that it runs"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.repeats, args.generations = 1, 1
    load_start = os.getloadavg()
    times: dict[str, list[float]] = {"compare": [], "by hand": []}
    with tempfile.TemporaryDirectory(prefix="compare-overhead-") as tmp:
        root = Path(tmp)
        plan_file = write_plan(root, args)
        for i in range(args.repeats):
            order = ("compare", "by hand") if i % 2 == 0 else ("by hand", "compare")
            for arm in order:
                where = root / f"{arm.replace(' ', '-')}-{i}"
                seconds = by_compare(plan_file, where) if arm == "compare" else by_hand(plan_file, where)
                times[arm].append(seconds)
                print(f"  {arm:8} repeat {i}: {seconds:.2f} s", flush=True)
    load_end = os.getloadavg()
    medians = {arm: statistics.median(values) for arm, values in times.items()}
    ratio = medians["compare"] / medians["by hand"]
    print(
        f"compare {medians['compare']:.2f} s | by hand {medians['by hand']:.2f} s | "
        f"ratio {ratio:.3f} (target <= {TARGET:.2f}) | load {load_start[0]:.2f} -> {load_end[0]:.2f}"
    )
    if args.json is not None:
        doc: dict[str, Any] = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "args": {k: str(v) for k, v in vars(args).items()},
            "times_s": times,
            "medians_s": medians,
            "ratio": round(ratio, 4),
            "target": TARGET,
            "load_average": {"start": list(load_start), "end": list(load_end)},
            "cpus": os.cpu_count(),
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
