"""Where failed runs first diverge, by cause: the same failed trajectories aligned by another version
of the evaluator (issue 25: effect-aware alignment).

Step 1 (``run``): the seed harness runs ``--tasks`` NL2Bash (or any) train tasks with ``--model`` at
temperature 0 through the pipeline's own scorer (sandboxed, references loaded); every trajectory,
its score and the task's reference are saved under ``--out``.

Step 2 (``align``): the saved failed runs are aligned against their references by whatever
``harnessevolve`` is importable (``PYTHONPATH`` chooses: this checkout, or an older one exported
with ``git archive``), with the task's effect oracle when that version has one; prints a table
of causes and the first hints, and writes ``--json``.

    HARNESSEVOLVE_LOCAL_THREADS=1 .venv/bin/python benchmarks/perf/divergence_causes.py run \\
        -b nl2bash -m local/qwen2.5-coder-0.5b --tasks 12 --out /tmp/dc-05
    .venv/bin/python benchmarks/perf/divergence_causes.py align --out /tmp/dc-05 --json after.json
    .venv/bin/python benchmarks/perf/divergence_causes.py smoke   # both steps, scripted, seconds
    PYTHONPATH=/tmp/old .venv/bin/python benchmarks/perf/divergence_causes.py align --out /tmp/dc-05
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import inspect
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path and not any("harnessevolve" in p for p in sys.path[:1]):
    sys.path.append(str(ROOT))


def run(args: argparse.Namespace) -> None:
    from harnessevolve.adapters import load_benchmark_spec
    from harnessevolve.core import atif, paths
    from harnessevolve.harness.load import load_harness
    from harnessevolve.runs.run_config import ExecutionConfig
    from harnessevolve.scoring.build import build_scorer
    from harnessevolve.scoring.references import load_references

    bench = load_benchmark_spec(args.benchmark, ())
    references = load_references(bench)
    tasks = [t for t in bench.split("train") if t.id in references][args.offset : args.offset + args.tasks]
    harness = load_harness(
        Path(args.harness) if args.harness else paths.builtin_dir("harnesses") / "shell-agent"
    )
    scorer = build_scorer(
        ExecutionConfig(concurrency=1),
        benchmark=bench,
        model=args.model,
        default_model=harness.model,
        seed=0,
        references=references,
    )
    results = asyncio.run(scorer.score(harness, tasks, "divergence causes"))
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    (out / "references").mkdir(exist_ok=True)
    rows = []
    for r in results:
        atif.save(r.trajectory, out / "runs" / f"{r.task_id}.json")
        atif.save(references[r.task_id], out / "references" / f"{r.task_id}.json")
        rows.append({"task": r.task_id, "score": r.score, "passed": r.passed})
    doc = {"benchmark": args.benchmark, "model": args.model, "tasks": rows, "command": " ".join(sys.argv)}
    (out / "runs.json").write_text(json.dumps(doc, indent=2))
    print(f"{sum(r['passed'] for r in rows)} of {len(rows)} passed; saved under {out}")


def align(args: argparse.Namespace) -> None:
    import harnessevolve
    from harnessevolve.adapters import load_benchmark_spec
    from harnessevolve.core import atif
    from harnessevolve.evaluate.alignment import first_divergence

    out = Path(args.out)
    doc = json.loads((out / "runs.json").read_text())
    bench = load_benchmark_spec(doc["benchmark"], ())
    oracle_for = None
    if "oracle" in inspect.signature(first_divergence).parameters:
        from harnessevolve.evaluate.effect_check import effect_oracle
        from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

        runner = sandboxed_runner(None)

        def oracle_for(task):  # noqa: ANN001, ANN202 - one line of glue
            return effect_oracle(task, timeout_s=10, runner=runner)

    causes: collections.Counter[str] = collections.Counter()
    signals = []
    for row in doc["tasks"]:
        if row["passed"]:
            continue
        task = bench.task(row["task"])
        run_traj = atif.load(out / "runs" / f"{row['task']}.json")
        ref = atif.load(out / "references" / f"{row['task']}.json")
        extra = {"oracle": oracle_for(task)} if oracle_for else {}
        signal = first_divergence(run_traj, ref, score=row["score"], **extra)
        causes[str(signal.cause)] += 1
        signals.append(
            {"task": row["task"], "cause": str(signal.cause), "step": signal.step, "hint": signal.hint}
        )
    version = Path(harnessevolve.__file__).resolve().parents[1]
    print(f"evaluator: {version}; {len(signals)} failed of {len(doc['tasks'])} ({doc['model']})")
    for cause, n in causes.most_common():
        print(f"  {cause:20} {n}")
    for s in signals:
        print(f"  {s['task']}: {s['cause']} @ step {s['step']}: {s['hint'][:150]}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"evaluator": str(version), "model": doc["model"], "causes": causes, "signals": signals},
                indent=2,
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    r = sub.add_parser("run")
    r.add_argument("-b", "--benchmark", default="nl2bash")
    r.add_argument("-m", "--model", required=True)
    r.add_argument("-H", "--harness", default=None)
    r.add_argument("--tasks", type=int, default=12)
    r.add_argument("--offset", type=int, default=0, help="skip this many train tasks first")
    r.add_argument("--out", required=True)
    a = sub.add_parser("align")
    a.add_argument("--out", required=True)
    a.add_argument("--json", default=None)
    sub.add_parser("smoke", help="run 2 shell-onecall tasks with the scripted learner, then align them")
    args = parser.parse_args()
    if args.step == "smoke":
        smoke()
        return
    run(args) if args.step == "run" else align(args)


def smoke() -> None:
    """Both steps, in seconds: a scripted agent (no model file) on two tasks, in a temporary folder."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="he-divergence-") as out:
        run(
            argparse.Namespace(
                benchmark="shell-onecall",
                model="scripted/policy:gives_up",
                harness=None,
                tasks=2,
                offset=0,
                out=out,
            )
        )
        align(argparse.Namespace(out=out, json=None))


if __name__ == "__main__":
    main()
