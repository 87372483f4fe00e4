"""Measure what `make demo` claims: the evolved harness's test-split gain over the seed harness.

For each seed: a fresh harness from the template, `harnessevolve run` (default: the embedded model),
then the sealed test split scored for the seed and the evolved revision. Prints one row per seed,
the mean and spread of the gain, and the run phase's wall time, next to the targets
(gain >= +15 points, run phase <= 15 minutes).

    .venv/bin/python benchmarks/perf/demo_gain.py [--seeds 3] [--benchmark shell-onecall]
        [--generations 4] [--batch-size 8] [--model local/smollm2-135m]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness_arms import add_run_arguments, evolve_arm, init_harness, smoke_arguments  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_arguments(parser)
    args = parser.parse_args()
    smoke_arguments(args)

    from harnessevolve.pipeline.final import score_test_split
    from harnessevolve.pipeline.state import RunHooks
    from harnessevolve.runs.rundir import RunDir

    rows = []
    for seed in range(args.seeds):
        with tempfile.TemporaryDirectory(prefix="he-demo-gain-") as tmp:
            harness = init_harness(Path(tmp) / "harness")
            outcome = evolve_arm(harness, args, seed)
            run_s = outcome.run_s
            record = score_test_split(
                harness,
                RunDir.find(outcome.run_id, harness).load(),
                model=args.model,
                seed=seed,
                hooks=RunHooks(),
            )
            seed_score, evolved = record["scores"]["seed"], record["scores"]["evolved"]
            rows.append((seed, outcome.accepted, seed_score, evolved, run_s))
            print(
                f"seed {seed}: accepted {outcome.accepted}, test {seed_score:.3f} -> {evolved:.3f} "
                f"({(evolved - seed_score) * 100:+.1f} points), run phase {run_s / 60:.1f} min",
                flush=True,
            )
    gains = [(r[3] - r[2]) * 100 for r in rows]
    spread = statistics.stdev(gains) if len(gains) > 1 else 0.0
    print()
    print(
        f"{'seed':>4} {'accepted':>8} {'seed test':>9} {'evolved test':>12} {'gain (pts)':>10} "
        f"{'run (min)':>9}"
    )
    for (seed, accepted, s, e, run_s), gain in zip(rows, gains, strict=True):
        print(f"{seed:>4} {accepted:>8} {s:>9.3f} {e:>12.3f} {gain:>+10.1f} {run_s / 60:>9.1f}")
    worst_run = max(r[4] for r in rows) / 60
    print(
        f"\nmean gain {statistics.mean(gains):+.1f} points (sd {spread:.1f}) over {len(rows)} seeds; "
        f"target >= +15.0: {'met' if statistics.mean(gains) >= 15 else 'MISSED'}"
    )
    print(f"slowest run phase {worst_run:.1f} min; target <= 15: {'met' if worst_run <= 15 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
