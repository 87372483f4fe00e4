"""Training speed of the policy trainer: SmolLM2-135M, full fine-tune vs LoRA, tokens/s.

    python benchmarks/perf/train_speed.py [--steps 3] [--batch-size 4] [--max-len 512] [--devices cpu,cuda]

Builds real samples (shell-onecall reference trajectories under the shell-agent harness, the data
`harnessevolve train` fine-tunes on), then for each device (the CPU, and CUDA when torch sees a
GPU) times ``--steps`` optimizer steps after one warm-up step, full fine-tune and LoRA, and prints
sequence tokens per second (padding excluded) side by side with the LoRA/full ratio. One command,
a few minutes on a CPU, well under one on a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from harnessevolve.core import atif
from harnessevolve.harness.load import load_harness
from harnessevolve.train.config import TrainConfig
from harnessevolve.train.fit import batch_loss, batches
from harnessevolve.train.policy import load_policy
from harnessevolve.train.samples import PromptStyle, build_samples

REPO = Path(__file__).resolve().parents[2]


def measure(device: str, lora: bool, args: argparse.Namespace) -> dict[str, float]:
    import torch

    config = TrainConfig(
        steps=args.steps + 1,
        batch_size=args.batch_size,
        max_len=args.max_len,
        lora=lora,
        lr=2e-4 if lora else 1e-5,
        device=device,
    )
    started = time.perf_counter()
    policy = load_policy("smollm2-135m", config)
    load_s = time.perf_counter() - started
    style = PromptStyle.for_harness(load_harness(REPO / "harnesses" / "shell-agent"))
    refs = [atif.load(p) for p in sorted((REPO / "trajectories" / "shell-onecall").glob("*.json"))]
    samples = build_samples(refs, policy.tokenizer, style, max_len=args.max_len, origin="reference")
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr)
    policy.model.train()
    tokens, seconds = 0, 0.0
    for step, batch in enumerate(batches(samples, config.batch_size, config.steps, config.seed)):
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        batch_loss(policy, batch, config, None).backward()  # type: ignore[attr-defined]
        optimizer.step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        if step > 0:  # step 0 warms up (allocator, kernels)
            seconds += time.perf_counter() - t0
            tokens += sum(len(s.input_ids) for s in batch)
    trainable = sum(p.numel() for p in params)
    del policy, optimizer
    return {
        "tokens_per_s": tokens / seconds,
        "s_per_step": seconds / args.steps,
        "tokens_per_step": tokens / args.steps,
        "trainable_params": trainable,
        "load_s": load_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps (after one warm-up step)")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-len", type=int, default=512)
    parser.add_argument("--devices", default="", help="comma-separated; default: cpu, and cuda if available")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="cpu, 1 step, batch 1: it runs (the real model)")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.batch_size, args.devices = 1, 1, "cpu"  # max_len kept: shorter samples are dropped
    import torch

    devices = [d for d in args.devices.split(",") if d] or ["cpu"] + (
        ["cuda"] if torch.cuda.is_available() else []
    )
    rows = []
    for device in devices:
        full = measure(device, False, args)
        lora = measure(device, True, args)
        rows.append({"device": device, "threads": torch.get_num_threads(), "full": full, "lora": lora})
        if not args.json:
            print(
                f"{device}: full {full['tokens_per_s']:.0f} tok/s, lora {lora['tokens_per_s']:.0f} tok/s",
                flush=True,
            )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"\nSmolLM2-135M, batch {args.batch_size}, max_len {args.max_len}, {args.steps} timed steps each")
    header = ("device", "full tok/s", "LoRA tok/s", "LoRA/full", "full s/step", "LoRA s/step")
    print(f"{header[0]:<8}{header[1]:>12}{header[2]:>12}{header[3]:>11}{header[4]:>13}{header[5]:>13}")
    for row in rows:
        full, lora = row["full"], row["lora"]
        ratio = lora["tokens_per_s"] / full["tokens_per_s"]
        print(
            f"{row['device']:<8}{full['tokens_per_s']:>12.0f}{lora['tokens_per_s']:>12.0f}{ratio:>10.2f}x"
            f"{full['s_per_step']:>13.2f}{lora['s_per_step']:>13.2f}"
        )
    full_n, lora_n = rows[0]["full"]["trainable_params"], rows[0]["lora"]["trainable_params"]
    print(f"trainable parameters: full {full_n:,}, LoRA {lora_n:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
