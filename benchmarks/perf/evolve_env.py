"""Environment evolution, measured: ``harnessevolve run`` with and without ``--evolve-environments``.

For each seed, both arms start from the same template harness and run the same generations and
minibatch size on the same benchmark and agent model (default: shell-onecall on the embedded
model), without the rollout cache. Printed per arm and seed: each generation's train pass rate
on its minibatch and the minibatch's mean difficulty level (1 = an original task; a generated task
has its variant's level), the rollouts the run spent (the evolve arm's include the one rollout per
variant that checks the current harness fails it), the generated tasks kept / tried, and the
sealed test split scored once by ``report --final`` for the seed and the evolved harness. Ends with
mean ± sd over seeds and the wall time. Validation and test are the same in both arms. With
``--max-tokens T`` both arms run until the same token budget is spent (equal budget) instead of for
the same number of generations.

    .venv/bin/python benchmarks/perf/evolve_env.py --seeds 3
    .venv/bin/python benchmarks/perf/evolve_env.py --seeds 1 --generations 3 --model scripted/...

Use HARNESSEVOLVE_LOCAL_THREADS=1 when anything else runs on the machine.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness_arms import add_arm_arguments, smoke_arguments  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "harnessevolve"]


def he(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, env=env)


def ledger(harness: Path) -> list[dict[str, Any]]:
    [run_dir] = sorted((harness / ".harnessevolve" / "runs").iterdir())[-1:]
    return [json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines() if line.strip()]


def level_of(task_id: str, levels: dict[str, int]) -> int:
    return levels.get(task_id, 1)


def one_run(args: argparse.Namespace, seed: int, evolve: bool, work: Path) -> dict[str, Any]:
    harness = work / f"{'evolve' if evolve else 'plain'}-{seed}"
    assert he("init", str(harness)).returncode == 0
    run = ["run", "-H", str(harness), "-b", args.benchmark, "-n", str(args.generations)]
    run += ["--batch-size", str(args.batch_size), "--seed", str(seed), "--no-cache"]
    run += ["--model", args.model] if args.model else []
    run += ["--evolve-environments", "--evolve-threshold", str(args.evolve_threshold)] if evolve else []
    if args.max_tokens:  # equal budget: both arms run until the same token budget is spent
        run[run.index("-n") + 1] = str(max(args.generations, 50))
        run += ["--max-tokens", str(args.max_tokens)]
    started = time.monotonic()
    done = he(*run)
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"run failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    events = ledger(harness)
    levels: dict[str, int] = {}
    generated = [e for e in events if e["event"] == "task_generated"]
    for e in generated:
        d = e.get("difficulty") or {}
        levels[e["task"]] = int(d.get("level", d.get("mutations", 2)))
    batches = [e for e in events if e["event"] == "batch_evaluated"]
    per_gen = [
        (b["generation"], float(b["score"]), statistics.mean(level_of(t, levels) for t in b["tasks"]))
        for b in batches
    ]
    final = he(
        "report", "-H", str(harness), "--final", "--json", *(["--model", args.model] if args.model else [])
    )
    test = json.loads(final.stdout)["test"]["scores"] if final.returncode == 0 else {}
    finished = next((e for e in reversed(events) if e["event"] == "run_finished"), {})
    return {
        "arm": "evolve" if evolve else "plain",
        "seed": seed,
        "per_generation": per_gen,
        "rollouts": finished.get("rollouts"),
        "tokens": finished.get("tokens"),
        "generated": len(generated),
        "kept": sum(1 for e in generated if e["kept"]),
        "test_seed": test.get("seed"),
        "test_final": test.get("evolved"),
        "seconds": round(seconds, 1),
    }


def mean_sd(values: list[float]) -> str:
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):+.3f} ± {sd:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arm_arguments(parser)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=0,
        help="equal budget: both arms run (up to 50 generations) until this many tokens are spent",
    )
    parser.add_argument(
        "--evolve-threshold", type=float, default=0.75, help="the evolve arm's --evolve-threshold"
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    parser.add_argument(
        "--smoke", action="store_true", help="1 seed, 1 generation, minibatch 2, the scripted learner"
    )
    args = parser.parse_args()
    smoke_arguments(args)
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="he-evolve-env-") as tmp:
        for seed in range(args.seeds):
            for evolve in (False, True):
                row = one_run(args, seed, evolve, Path(tmp))
                rows.append(row)
                gens = "  ".join(f"g{g}: {s:.2f}@L{lvl:.2f}" for g, s, lvl in row["per_generation"])
                print(
                    f"{row['arm']:6} seed {seed}: {gens} | rollouts {row['rollouts']} | generated "
                    f"{row['kept']}/{row['generated']} kept | test {row['test_seed']} -> {row['test_final']} "
                    f"| {row['seconds']} s",
                    flush=True,
                )
    print()
    for arm in ("plain", "evolve"):
        mine = [r for r in rows if r["arm"] == arm]
        gains = [r["test_final"] - r["test_seed"] for r in mine if r["test_final"] is not None]
        last_train = [r["per_generation"][-1][1] for r in mine if r["per_generation"]]
        rollouts = statistics.mean(r["rollouts"] or 0 for r in mine)
        tokens = statistics.mean(r["tokens"] or 0 for r in mine)
        print(
            f"{arm:6}: test gain {mean_sd(gains)} | last-generation train pass rate "
            f"{statistics.mean(last_train):.3f} | rollouts {rollouts:.0f} | tokens {tokens:.0f}"
        )
    print(f"wall time {time.monotonic() - started:.0f} s")
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
