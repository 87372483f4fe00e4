"""Rollouts per second of the embedded model at local-pool sizes 1 and 2 (``HARNESSEVOLVE_LOCAL_POOL``).

The seed harness (``harnessevolve init``: shell-agent) is scored on the first ``--tasks`` test tasks
of NL2Bash with the pipeline's scorer (sandboxed rollouts, effect checks), once per configuration
``POOLxCONCURRENCY`` (``--configs``, default ``1x1,1x2,2x2``: one instance alone, one instance
shared by two rollouts, two instances), each in its own process (the pool is sized when the model
is first loaded). Every process first scores ``--warmup`` other tasks untimed, so the instances are
loaded before the clock starts. Each llama.cpp instance has 1 thread. The configurations run in
the order given, alternating ``--rounds`` times; a figure is the median over rounds. A ``-lifo``
suffix (``2x2-lifo``) turns off the pool's cache preference in that child (every call takes the free
instance given back last, as before ``borrow(prefer=...)``): ``--configs 1x1,2x2-lifo,2x2`` measures
what the preference gives, side by side in one run. Target: a pool
of 2 on 2 cores gives >= 1.7x the rollouts/s of the best pool-of-1 configuration. Pass counts are
printed too: at temperature 0 the pool must not change what the agent does.

    .venv/bin/python benchmarks/perf/local_pool_speed.py [--model local/qwen2.5-coder-0.5b] [--tasks 8]
    .venv/bin/python benchmarks/perf/local_pool_speed.py --smoke   # smollm2-135m, 2 tasks: it runs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
TARGET = 1.7


def one(
    model: str, benchmark: str, tasks: int, warmup: int, concurrency: int, prefer: bool = True
) -> dict[str, float]:
    """In a child process whose environment holds the pool size: score, time, report as JSON."""
    from harness_arms import init_harness, make_scorer, score_split

    from harnessevolve.adapters import load_benchmark_spec
    from harnessevolve.harness.load import load_harness
    from harnessevolve.models import local

    if not prefer:  # every free instance scores the same: the last given back is lent
        local.LoadedModel.reuse_score = lambda _self, _conversation: 0  # type: ignore[method-assign]

    bench = load_benchmark_spec(benchmark)
    test = sorted(bench.split("test"), key=lambda t: t.id)
    timed, first = test[:tasks], test[tasks : tasks + warmup]
    with tempfile.TemporaryDirectory(prefix="he-pool-") as tmp:
        harness = load_harness(init_harness(Path(tmp) / "seed"))
        scorer = make_scorer(bench, model, concurrency=concurrency)
        score_split(scorer, harness, first, "warm-up")
        started = time.perf_counter()
        results = score_split(scorer, harness, timed, "timed")
        wall = time.perf_counter() - started
    passed, tokens = sum(r.passed for r in results), sum(r.tokens for r in results)
    prompt = sum(int(r.trajectory.final_metrics.get("total_prompt_tokens", 0)) for r in results)
    cached = sum(int(r.trajectory.final_metrics.get("total_cached_tokens", 0)) for r in results)
    # a rollout that never reached the model (a name litellm cannot serve offline) is fast and
    # scores 0: its error is reported so that the parent refuses the figure
    errors = [r.infra or (r.signal.hint if r.signal else "") for r in results if not r.tokens]
    # what this child really ran at, so that the table shows it rather than what was asked for
    at_once = scorer.executor.concurrency  # a LocalExecutor (harness_arms.make_scorer)
    return {
        "rollouts": len(results),
        "wall_s": wall,
        "passed": passed,
        "tokens": tokens,
        "prompt_tokens": prompt,
        "evaluated_prompt_tokens": prompt - cached,  # the rest came from an instance's KV cache
        "at_once": at_once,
        "without_tokens": len(errors),
        "error": next((e for e in errors if e), ""),
    }


Config = tuple[int, int, bool]
"""(pool size, rollouts at once, cache preference on)."""


def parse_config(text: str) -> Config:
    sizes, _, variant = text.strip().partition("-")
    if variant not in ("", "lifo"):
        raise SystemExit(f"--configs: {text!r}: the only suffix is -lifo")
    pool, concurrency = (int(n) for n in sizes.split("x"))
    return pool, concurrency, variant != "lifo"


def pool_label(config: Config) -> str:
    return f"{config[0]}" + ("" if config[2] else " lifo")


def measure(args: argparse.Namespace, pool: int, concurrency: int, prefer: bool = True) -> dict[str, float]:
    env = {**os.environ, "HARNESSEVOLVE_LOCAL_POOL": str(pool), "HARNESSEVOLVE_LOCAL_THREADS": "1"}
    child = [sys.executable, __file__, "--child", "--model", args.model, "--benchmark", args.benchmark]
    child += [
        "--tasks",
        str(args.tasks),
        "--warmup",
        str(args.warmup),
        "--concurrency",
        str(concurrency),
        *([] if prefer else ["--no-prefer"]),
    ]
    done = subprocess.run(child, env=env, check=True, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise SystemExit(
            f"pool {pool} x {concurrency}: the child printed no figures; its stderr:\n{done.stderr[-2000:]}"
        )
    result = json.loads(lines[-1])
    if result["at_once"] != concurrency:
        raise SystemExit(
            f"pool {pool}: asked for {concurrency} rollouts at once, the child ran {result['at_once']}"
        )
    if result.get("without_tokens"):
        raise SystemExit(
            f"pool {pool} x {concurrency}: {result['without_tokens']} of {result['rollouts']} rollouts "
            f"used no model tokens, so the figure times no model (is --model a local/ name?): "
            f"{str(result.get('error'))[:300]}"
        )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--benchmark", default="nl2bash")
    parser.add_argument("--tasks", type=int, default=8, help="timed test tasks per configuration")
    parser.add_argument("--warmup", type=int, default=2, help="untimed tasks first (loads the instances)")
    parser.add_argument("--configs", default="1x1,1x2,2x2", help="POOLxCONCURRENCY, comma-separated")
    parser.add_argument("--concurrency", type=int, default=1, help=argparse.SUPPRESS)  # the child's
    parser.add_argument("--no-prefer", action="store_true", help=argparse.SUPPRESS)  # the child's
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", help="write the raw figures (every run, load averages) as JSON here")
    parser.add_argument("--check", action="store_true", help="exit 1 when the largest pool is under target")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="smollm2-135m, 2 tasks, 1 warm-up, configs 1x1,2x2-lifo,2x2 (no target)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        args.model, args.tasks, args.warmup, args.check = "local/smollm2-135m", 2, 1, False
        args.configs = "1x1,2x2-lifo,2x2"  # the preference off and on: both paths run
    if args.child:
        # flushed at once: a child whose llama.cpp instances end with it has lost an unflushed line
        print(
            json.dumps(
                one(args.model, args.benchmark, args.tasks, args.warmup, args.concurrency, not args.no_prefer)
            ),
            flush=True,
        )
        return 0
    configs = [parse_config(c) for c in args.configs.split(",")]
    load_before = os.getloadavg()[0]
    runs: dict[Config, list[dict[str, float]]] = {c: [] for c in configs}
    for _ in range(args.rounds):
        for pool, concurrency, prefer in configs:
            runs[(pool, concurrency, prefer)].append(measure(args, pool, concurrency, prefer))
    print(
        f"{args.model} on {args.benchmark}: {args.tasks} tasks x {args.rounds} round(s), "
        f"1 thread per instance, {os.cpu_count()} cores; "
        f"loadavg {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    rates = {c: statistics.median(r["rollouts"] / r["wall_s"] for r in runs[c]) for c in configs}
    single = max((c for c in configs if c[0] == 1), key=lambda c: rates[c], default=configs[0])
    print(
        f"{'pool':>9} {'at once':>8} {'rollouts/s':>11} {'s/rollout':>10} {'passed':>7} "
        f"{'vs best pool 1':>15} {'prompt tok/rollout':>19} {'evaluated':>10}  per round (rollouts/s; tokens)"
    )
    for c in configs:
        passed = "/".join(str(int(r["passed"])) for r in runs[c])
        each = ", ".join(f"{r['rollouts'] / r['wall_s']:.3f}; {int(r['tokens'])}" for r in runs[c])
        prompt = statistics.median(r["prompt_tokens"] / r["rollouts"] for r in runs[c])
        evaluated = statistics.median(r["evaluated_prompt_tokens"] / r["rollouts"] for r in runs[c])
        print(
            f"{pool_label(c):>9} {runs[c][0]['at_once']:>8} {rates[c]:>11.3f} {1 / rates[c]:>10.1f} "
            f"{passed:>7} {rates[c] / rates[single]:>14.2f}x {prompt:>19.0f} {evaluated:>10.0f}  {each}"
        )
    largest = max(configs, key=lambda c: (c[0], c[2], rates[c]))  # the default: preference on
    top = rates[largest] / rates[single]
    verdict = "met" if top >= TARGET else "MISSED"
    print(
        f"pool {largest[0]} vs pool 1 (its best, {single[1]} at once): {top:.2f}x "
        f"(target >= {TARGET}x: {verdict})"
    )
    if args.out:
        raw = {
            "script": "benchmarks/perf/local_pool_speed.py",
            "argv": sys.argv[1:],
            "model": args.model,
            "benchmark": args.benchmark,
            "load_average_before": load_before,
            "load_average_after": os.getloadavg()[0],
            "configs": [
                {"pool": c[0], "at_once": c[1], "prefer": c[2], "rollouts_per_s": rates[c], "runs": runs[c]}
                for c in configs
            ],
            "pool_vs_single": top,
            "target": TARGET,
        }
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(raw, indent=2) + "\n")
        print(f"raw figures: {args.out}")
    return 1 if args.check and top < TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
