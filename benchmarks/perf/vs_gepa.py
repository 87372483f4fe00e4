"""harnessevolve vs GEPA vs best-of-k vs the seed harness, at equal rollout budget (issue 10).

Same agent model, same seed harness (the template), same benchmark splits, same agent loop and
checkers (``scoring.scorer.Scorer``) for every arm. Per seed:

1. harnessevolve, default offline configuration (as ``make demo``: 4 generations, minibatch 8,
   proposers demo/rules, gates/default.yaml). Its rollouts are the budget B of the other arms.
2. GEPA 0.1.4 through its adapter API: candidate = the harness's editable text components
   (prompts/*.md, skills' SKILL.md bodies); ``max_metric_calls = B`` (one metric call = one rollout);
   reflection model = ``--reflection-model`` (default: the agent model, the only model offline).
3. best-of-k: the seed harness at temperature ``--temperature`` with k = round(B / |test|) samples
   per task. Reported two ways: ``sc`` picks one sample per task without the checker (the largest
   group of identical action sequences among the runs that submitted, earliest on ties) and is the
   deployable score; ``pass@k`` counts a task solved when any sample passes (oracle upper bound).
4. the seed harness unchanged (temperature 0: identical on every seed).

The test split is scored once per arm and seed, at the end.

    .venv/bin/python benchmarks/perf/vs_gepa.py [--seeds 3] [--quick] [--json OUT]
        [--reflection-model MODEL] [--generations 4] [--batch-size 8] [--jobs N] [--threads T]
        [--no-bestofk-validation]

docs/compare.md explains the definitions and holds the latest table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gepa_arm import LiteLLMReflector, harness_components, run_gepa  # noqa: E402
from harness_arms import (  # noqa: E402
    ProgressLine,
    add_run_arguments,
    evolve_arm,
    init_harness,
    make_scorer,
    score_split,
    set_local_threads,
    smoke_arguments,
    unevolved_row,
)

from harnessevolve.core.tasks import Benchmark, Task, load_benchmark  # noqa: E402
from harnessevolve.harness.load import load_harness  # noqa: E402
from harnessevolve.harness.model import Harness  # noqa: E402
from harnessevolve.scoring.best_of_k import best_of_k as package_best_of_k  # noqa: E402
from harnessevolve.scoring.best_of_k import sampling_harness, self_consistent_pick  # noqa: E402,F401
from harnessevolve.scoring.scorer import Scorer, mean_score  # noqa: E402
from harnessevolve.scoring.sequential import RepeatedScorer  # noqa: E402

# ---------------------------------------------------------------- best-of-k arm


def best_of_k(
    seed_harness: Harness, tasks: Sequence[Task], repeated: RepeatedScorer, k: int, label: str
) -> dict[str, float]:
    """k samples per task of a sampling harness (``scoring.best_of_k``, the control of
    ``report --final``): self-consistency (``sc``), oracle ``pass@k`` and ``pass@1``."""
    import asyncio

    return asyncio.run(package_best_of_k(repeated, seed_harness, tasks, k, label)).arms()


def sampling_copy(seed_dir: Path, dest: Path, temperature: float) -> Harness:
    return sampling_harness(seed_dir, dest, temperature)


# ---------------------------------------------------------------- the comparison

ARMS = ("seed harness", "harnessevolve", "GEPA", "best-of-k (sc)", "best-of-k (pass@k oracle)")
COLUMNS = ("rollouts", "tokens", "wall_min", "validation", "test", "gain_pts", "to_best")


def curve_best(curve: Sequence[tuple[int, float]]) -> tuple[float, int]:
    best = max(score for _, score in curve)
    return best, next(n for n, score in curve if score >= best - 1e-9)


def gepa_arm(
    ctx: dict[str, Any],
    test: Sequence[Task],
    reflection_model: str,
    max_tokens: int,
    seed: int,
    tmp: Path,
    budget: int,
) -> tuple[dict[str, Any], dict[str, str]]:
    """GEPA from the seed harness with max_metric_calls = ``budget``, its best candidate scored on
    ``test``: the row both this script and efficacy.py report, and the best candidate."""
    started = time.monotonic()
    bench: Benchmark = ctx["bench"]
    scorer = make_scorer(bench, ctx["model"], seed=seed, on_progress=ProgressLine(f"seed {seed} GEPA"))
    reflector = LiteLLMReflector(reflection_model, max_tokens=max_tokens, seed=seed * 10_000)
    best, adapter = run_gepa(
        ctx["seed_dir"],
        bench,
        scorer,
        budget=budget,
        reflector=reflector,
        seed=seed,
        work_dir=tmp / f"gepa-{seed}",
    )
    score = mean_score(score_split(ctx["evalscorer"], adapter.harness_for(best), test, "test: GEPA"))
    validation, to_best = curve_best(adapter.validation_log)
    row = {
        "rollouts": scorer.rollouts,
        "tokens": scorer.tokens + reflector.tokens,
        "wall_min": (time.monotonic() - started) / 60,
        "validation": validation,
        "test": score,
        "to_best": to_best,
        "reflection_calls": reflector.calls,
        "reflection_tokens": reflector.tokens,
        "candidates": len(adapter.harnesses),
        "proposals_failed": sum("failed" in line for line in adapter.log.lines),
        "accepted_by_gepa": sum("New program candidate index" in line for line in adapter.log.lines),
        "curve": adapter.validation_log,
    }
    return row, best


def save_partial(args: argparse.Namespace, seed: int, rows: dict[str, Any]) -> None:
    """Each seed's numbers so far, next to ``--json``: they survive a later failure or a kill."""
    if args.json:
        args.json.with_suffix(f".seed{seed}.json").write_text(json.dumps(rows, indent=2, default=str))


def run_seed(
    args: argparse.Namespace, seed: int, ctx: dict[str, Any], tmp: Path
) -> dict[str, dict[str, Any]]:
    bench: Benchmark = ctx["bench"]
    validation, test = bench.split("validation"), bench.split("test")
    evalscorer: Scorer = ctx["evalscorer"]
    model: str = ctx["model"]
    rows: dict[str, dict[str, Any]] = {"seed harness": dict(ctx["seed_row"])}

    def say(message: str) -> None:
        print(f"  [seed {seed}] {message}", flush=True)

    # 1. harnessevolve, default offline configuration; its rollouts are the budget B.
    started = time.monotonic()
    he_dir = init_harness(tmp / f"he-{seed}")
    outcome = evolve_arm(he_dir, args, seed, log=say, progress=ProgressLine(f"seed {seed} harnessevolve"))
    he_test = mean_score(score_split(evalscorer, load_harness(he_dir), test, "test: harnessevolve"))
    budget = outcome.rollouts
    rows["harnessevolve"] = {
        "rollouts": budget,
        "tokens": outcome.tokens,
        "wall_min": (time.monotonic() - started) / 60,
        "validation": outcome.best_validation,
        "test": he_test,
        "to_best": outcome.rollouts_to_best,
        "accepted": outcome.accepted,
        "curve": list(outcome.validation_curve),
    }
    say(f"harnessevolve: B = {budget} rollouts, {outcome.accepted} accepted, test {he_test:.3f}")
    save_partial(args, seed, rows)

    # 2. GEPA with max_metric_calls = B.
    gepa, best = gepa_arm(
        ctx, test, args.reflection_model or model, args.reflection_max_tokens, seed, tmp, budget
    )
    rows["GEPA"] = {
        **gepa,
        "changed": sorted(k for k, v in best.items() if v != ctx["seed_components"].get(k)),
    }
    say(f"GEPA: {gepa['rollouts']} rollouts, {gepa['reflection_calls']} reflections, test {gepa['test']:.3f}")
    save_partial(args, seed, rows)

    # 3. best-of-k of the seed harness, k x |test| ~ B.
    started = time.monotonic()
    k = max(1, round(budget / len(test)))
    sampler = sampling_copy(ctx["seed_dir"], tmp / f"bok-{seed}", args.temperature)
    repeated = RepeatedScorer(
        make_scorer(bench, model, seed=1_000 * (seed + 1), on_progress=ProgressLine(f"seed {seed} best-of-k"))
    )
    on_test = best_of_k(sampler, test, repeated, k, "best-of-k: test")
    test_rollouts, test_tokens = repeated.rollouts, repeated.tokens
    test_min = (time.monotonic() - started) / 60
    on_val = (
        best_of_k(sampler, validation, repeated, k, "best-of-k: validation")
        if args.bestofk_validation
        else {"sc": float("nan"), "pass@k": float("nan")}
    )
    for arm, key in (("best-of-k (sc)", "sc"), ("best-of-k (pass@k oracle)", "pass@k")):
        rows[arm] = {
            "rollouts": test_rollouts,
            "tokens": test_tokens,
            "wall_min": test_min,
            "validation": on_val[key],
            "test": on_test[key],
            "to_best": test_rollouts,
            "k": k,
            "pass@1": on_test["pass@1"],
        }
    say(f"best-of-{k}: test sc {on_test['sc']:.3f}, pass@k {on_test['pass@k']:.3f}")
    for row in rows.values():
        row["gain_pts"] = (row["test"] - ctx["seed_row"]["test"]) * 100
    save_partial(args, seed, rows)
    return rows


def rederive(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Derived cells recomputed from a saved seed's raw records: best validation and the rollouts
    that first reached it (from each optimizer's curve), and the test gain."""
    for row in rows.values():
        if row.get("curve"):
            row["validation"], row["to_best"] = curve_best(row["curve"])
        row["gain_pts"] = (row["test"] - rows["seed harness"]["test"]) * 100
    return rows


def spread(values: list[float]) -> tuple[float, float]:
    clean = [v for v in values if v == v]  # drop NaN (not measured)
    if not clean:
        return float("nan"), float("nan")
    return statistics.mean(clean), statistics.stdev(clean) if len(clean) > 1 else 0.0


def fmt(values: list[float], digits: int) -> str:
    mean, sd = spread(values)
    if mean != mean:
        return "n/a"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def summarize(per_seed: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    def col(arm: str, key: str) -> list[float]:
        return [float(s[arm][key]) for s in per_seed]

    he_gain, gepa_gain = spread(col("harnessevolve", "gain_pts"))[0], spread(col("GEPA", "gain_pts"))[0]
    # Rollouts harnessevolve needed to reach GEPA's best validation score, per seed.
    to_match = []
    for s in per_seed:
        gepa_best = s["GEPA"]["validation"]
        reached = next((n for n, v in s["harnessevolve"]["curve"] if v >= gepa_best - 1e-9), None)
        to_match.append(reached)
    matched = [n for n in to_match if n is not None]
    gepa_spent = statistics.mean(col("GEPA", "rollouts"))
    half = len(matched) == len(to_match) and statistics.mean(matched) <= 0.5 * gepa_spent
    sc, oracle = spread(col("best-of-k (sc)", "test"))[0], spread(col("best-of-k (pass@k oracle)", "test"))[0]
    he_test = spread(col("harnessevolve", "test"))[0]
    return {
        "gain_ratio": he_gain / gepa_gain if gepa_gain > 0 else None,
        "he_gain": he_gain,
        "gepa_gain": gepa_gain,
        "he_rollouts_to_gepa_best": to_match,
        "gepa_rollouts": gepa_spent,
        "target_vs_gepa": he_gain >= gepa_gain and half,
        "target_gain_ge_gepa": he_gain >= gepa_gain,
        "target_half_rollouts": half,
        "target_above_best_of_k": he_test > sc,
        "above_oracle": he_test > oracle,
    }


def print_table(per_seed: list[dict[str, dict[str, Any]]], summary: dict[str, Any]) -> None:
    header = f"{'arm':<26} {'rollouts':>14} {'tokens (k)':>14} {'wall (min)':>11} {'validation':>13} "
    header += f"{'test':>13} {'gain (pts)':>13} {'rollouts to best val':>20}"
    print("\n" + header)
    for arm in ARMS:
        vals = {c: [float(s[arm][c]) for s in per_seed] for c in COLUMNS}
        print(
            f"{arm:<26} {fmt(vals['rollouts'], 0):>14} {fmt([v / 1000 for v in vals['tokens']], 0):>14} "
            f"{fmt(vals['wall_min'], 1):>11} {fmt(vals['validation'], 3):>13} {fmt(vals['test'], 3):>13} "
            f"{fmt(vals['gain_pts'], 1):>13} {fmt(vals['to_best'], 0):>20}"
        )
    ks = sorted({s["best-of-k (sc)"]["k"] for s in per_seed})
    print(f"\nmean ± sd over {len(per_seed)} seed(s); best-of-k used k = {', '.join(map(str, ks))}")
    ratio = summary["gain_ratio"]
    print(
        f"test gain: harnessevolve {summary['he_gain']:+.1f} pts, GEPA {summary['gepa_gain']:+.1f} pts; "
        "ratio " + (f"{ratio:.2f}" if ratio is not None else "n/a (GEPA gained nothing)")
    )
    reach = ", ".join("never" if n is None else str(n) for n in summary["he_rollouts_to_gepa_best"])
    print(
        f"rollouts harnessevolve needed to reach GEPA's best validation score: {reach} "
        f"(GEPA spent {summary['gepa_rollouts']:.0f})"
    )

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    print(
        "target: harnessevolve gain >= GEPA's with <= half GEPA's rollouts: "
        f"{verdict(summary['target_vs_gepa'])} (gain {verdict(summary['target_gain_ge_gepa'])}, "
        f"half rollouts {verdict(summary['target_half_rollouts'])})"
    )
    print(
        f"target: harnessevolve test above best-of-k (sc) at equal budget: "
        f"{verdict(summary['target_above_best_of_k'])}; above the pass@k oracle: "
        f"{'yes' if summary['above_oracle'] else 'no'}"
    )


def seed_in_process(args: argparse.Namespace, seed: int, seed_row: dict[str, Any], tmp: Path) -> dict:
    """One seed in a worker process (``--jobs``): its own model instance and scorers."""
    if args.threads:
        set_local_threads(args.threads)
    bench = load_benchmark(args.benchmark)
    seed_dir = tmp / f"seed-copy-{seed}"
    init_harness(seed_dir)
    model = args.model or load_harness(seed_dir).model
    ctx = {
        "bench": bench,
        "evalscorer": make_scorer(bench, model, on_progress=ProgressLine(f"seed {seed} final scoring")),
        "model": model,
        "seed_dir": seed_dir,
        "seed_row": seed_row,
        "seed_components": harness_components(seed_dir),
    }
    return run_seed(args, seed, ctx, tmp)


def run_seeds_in_processes(args: argparse.Namespace, seed_row: dict[str, Any], tmp: Path) -> list[dict]:
    """Seeds in ``--jobs`` worker processes (spawned: llama.cpp and asyncio do not survive fork)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
        futures = [pool.submit(seed_in_process, args, seed, seed_row, tmp) for seed in range(args.seeds)]
        return [f.result() for f in futures]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_arguments(parser)
    parser.add_argument("--quick", action="store_true", help="smoke check: 1 seed, 1 generation, minibatch 4")
    parser.add_argument("--json", type=Path, default=None, help="write every number here")
    parser.add_argument(
        "--reflection-model", default=None, help="GEPA's reflection model (default: the agent model)"
    )
    parser.add_argument("--reflection-max-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=0.7, help="best-of-k sampling temperature")
    parser.add_argument(
        "--jobs", type=int, default=1, help="seeds run at once, each in its own process (default 1)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="llama.cpp threads of the embedded model (package: 2)"
    )
    parser.add_argument(
        "--no-bestofk-validation",
        dest="bestofk_validation",
        action="store_false",
        help="skip best-of-k on validation (it doubles that arm's time and selects nothing)",
    )
    parser.add_argument(
        "--from-json", type=Path, default=None, help="print the table of a saved --json run, run nothing"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        per_seed = [rederive(rows) for rows in saved["seeds"]]
        print_table(per_seed, summarize(per_seed))
        return 0
    if args.quick:
        args.seeds, args.generations, args.batch_size = 1, 1, 4
    smoke_arguments(args)
    if args.threads:
        set_local_threads(args.threads)
    bench = load_benchmark(args.benchmark)
    per_seed = []
    total = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="he-vs-gepa-") as tmp_name:
        tmp = Path(tmp_name)
        seed_dir = init_harness(tmp / "seed")
        seed_harness = load_harness(seed_dir)
        model = args.model or seed_harness.model
        evalscorer = make_scorer(
            bench, model, on_progress=ProgressLine("final scoring")
        )  # temperature 0: one rollout per (harness, task) is enough
        started = time.monotonic()
        seed_val = mean_score(
            score_split(evalscorer, seed_harness, bench.split("validation"), "seed: validation")
        )
        seed_test = mean_score(score_split(evalscorer, seed_harness, bench.split("test"), "test: seed"))
        seed_row = unevolved_row(seed_val, seed_test, started)
        print(f"seed harness: validation {seed_val:.3f}, test {seed_test:.3f} ({model})", flush=True)
        ctx = {
            "bench": bench,
            "evalscorer": evalscorer,
            "model": model,
            "seed_dir": seed_dir,
            "seed_row": seed_row,
            "seed_components": harness_components(seed_dir),
        }
        if args.jobs > 1:
            per_seed = run_seeds_in_processes(args, seed_row, tmp)
        else:
            for seed in range(args.seeds):
                print(f"seed {seed}:", flush=True)
                per_seed.append(run_seed(args, seed, ctx, tmp))
    summary = summarize(per_seed)
    print_table(per_seed, summary)
    print(f"total wall time {(time.monotonic() - total) / 60:.1f} min")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"args": {k: str(v) for k, v in vars(args).items()}, "seeds": per_seed, "summary": summary},
                indent=2,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
