"""Does the policy trainer help? A short CPU RFT run of SmolLM2-135M on shell-onecall, before/after.

    python benchmarks/perf/train_gain.py [--tasks 32] [--steps 16] [--lr 5e-5] [--batch-size 4]

1. Scores the untrained model (``local/torch:smollm2-135m``: the embedded model's GGUF, dequantised
   and run by torch) on the train split with the shell-agent harness (greedy, as the harness sets).
2. Fine-tunes it (RFT) on the train split's reference trajectories plus the baseline's own
   successful rollouts (whose recorded token ids make token-exact samples), on the CPU.
3. Scores the checkpoint (``local/torch:<checkpoint>``) on the same tasks.

Prints the training loss before/after (mean NLL per generated token on the training samples) and the
train-split success before/after. Train-split success measures fitting the collected data, which
is what this stage is for; held-out transfer is the gates' business.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from harnessevolve.core.tasks import Benchmark, load_benchmark
from harnessevolve.harness.load import load_harness
from harnessevolve.models.torch_backend import release_models
from harnessevolve.runs.run_config import ExecutionConfig
from harnessevolve.scoring.build import build_scorer
from harnessevolve.scoring.references import load_references
from harnessevolve.scoring.scorer import TaskResult
from harnessevolve.train.config import TrainConfig
from harnessevolve.train.session import train_from_trajectories

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harnesses" / "shell-agent"


def score(
    model: str, benchmark: Benchmark, tasks: list, references: dict, label: str
) -> tuple[list[TaskResult], float]:
    harness = load_harness(HARNESS)
    scorer = build_scorer(
        ExecutionConfig(concurrency=1),
        benchmark=benchmark,
        model=model,
        default_model=model,
        seed=0,
        references=references,
    )
    started = time.monotonic()
    results = asyncio.run(scorer.score(harness, tasks, label))
    release_models(model)
    passed = sum(r.passed for r in results)
    print(f"{label}: {passed}/{len(results)} passed in {time.monotonic() - started:.0f} s", flush=True)
    return results, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks", type=int, default=32, help="train tasks scored (the first N, every family)"
    )
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-len", type=int, default=512)
    parser.add_argument("--eval-samples", type=int, default=12, help="samples the loss is measured on")
    parser.add_argument("--out", type=Path, default=None, help="checkpoint folder (default: a temp folder)")
    parser.add_argument(
        "--skip-untrained",
        action="store_true",
        help="do not score the untrained model (reuse an earlier number; decoding is greedy)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="2 tasks, 1 step: it runs (the real model)")
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.steps, args.batch_size, args.eval_samples = 2, 1, 1, 2
        args.skip_untrained = True  # the references alone are the training data

    benchmark = load_benchmark("shell-onecall")
    train = sorted(benchmark.split("train"), key=lambda t: (t.id[-2:], t.id))[: args.tasks]
    references = load_references(benchmark)
    base = "local/torch:smollm2-135m"
    before, before_s = (
        ([], 0.0) if args.skip_untrained else score(base, benchmark, train, references, "untrained")
    )

    successes = [r.trajectory for r in before if r.passed]
    train_refs = [references[t.id].with_extra(reference="file") for t in benchmark.split("train")]
    out = args.out or Path(tempfile.mkdtemp(prefix="he-train-gain-")) / "checkpoint"
    config = TrainConfig(
        mode="rft",
        steps=args.steps,
        lr=args.lr,
        batch_size=args.batch_size,
        max_len=args.max_len,
        device="cpu",
    )
    started = time.monotonic()
    result = train_from_trajectories(
        [*train_refs, *successes],
        config,
        base_model="smollm2-135m",
        out_dir=out,
        harness_dir=HARNESS,
        on_step=lambda step, loss: print(f"  step {step}/{args.steps}: loss {loss:.4f}", flush=True),
    )
    train_s = time.monotonic() - started
    after, after_s = score(result.model, benchmark, train, references, "trained")

    summary = {
        "tasks": len(train),
        "samples": result.samples,
        "data": result.data,
        "loss_before": round(result.loss_before, 4),
        "loss_after": round(result.loss_after, 4),
        "success_before": sum(r.passed for r in before) / len(before) if before else None,
        "success_after": sum(r.passed for r in after) / len(after),
        "train_tokens_per_s": round(result.tokens_per_s, 1),
        "train_s": round(train_s, 1),
        "score_s": [round(before_s, 1), round(after_s, 1)],
        "checkpoint": str(result.checkpoint),
        "config": config.to_dict(),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"\nRFT, {args.steps} steps x batch {args.batch_size}, lr {args.lr}, CPU; {result.samples} samples")
    recorded, retokenised = result.data["recorded_token_ids"], result.data["chat_template"]
    print(f"  ({recorded} with recorded token ids, {retokenised} retokenised)")
    print(
        f"training loss (NLL / generated token): {summary['loss_before']:.4f} -> {summary['loss_after']:.4f}"
    )
    shown = "not scored" if summary["success_before"] is None else f"{summary['success_before']:.3f}"
    print(f"train-split success ({len(train)} tasks):   {shown} -> {summary['success_after']:.3f}")
    speed = f"{result.tokens_per_s:.0f} tok/s"
    print(f"training {train_s:.0f} s ({speed}); scoring {before_s:.0f} s + {after_s:.0f} s")
    print(f"checkpoint: {result.checkpoint}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
