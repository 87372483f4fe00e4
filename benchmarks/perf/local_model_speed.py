"""Speed and memory of the embedded local model (SmolLM2-135M through llama.cpp).

    python benchmarks/perf/local_model_speed.py [--runs 5] [--max-tokens 128] [--check]

Loads the model once, generates ``--runs`` completions through the package's own
``generate`` and reports, from llama.cpp's own counters, prompt processing and
generation speed separately, plus peak resident memory, beside the targets. ``--check``
exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.models.local import LocalModelConfig, generate, load_model, resolve_model_path

TARGET_GEN_TOKENS_PER_S = 60.0
TARGET_RSS_MB = 1024.0

PROMPTS = [
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a shell pipeline works, with three examples.",
    "Describe a walk through a forest in autumn, in detail.",
    "List ten ideas for small Python command-line tools and what each does.",
    "Write a letter to a friend about learning to cook.",
]
SYSTEM = "You are a helpful assistant. " + "Answer carefully and completely. " * 40  # ~300 prompt tokens


@dataclass(frozen=True)
class Counters:
    prompt_ms: float
    prompt_tokens: int
    gen_ms: float
    gen_tokens: int


def _perf(llama: object) -> Counters:
    import llama_cpp

    data = llama_cpp.llama_perf_context(llama._ctx.ctx)  # type: ignore[attr-defined]
    return Counters(data.t_p_eval_ms, data.n_p_eval, data.t_eval_ms, data.n_eval)


def _reset_perf(llama: object) -> None:
    import llama_cpp

    llama_cpp.llama_perf_context_reset(llama._ctx.ctx)  # type: ignore[attr-defined]


def peak_rss_mb() -> tuple[float, float | None]:
    """Peak resident memory: ru_maxrss, and VmHWM from /proc when there is one (MiB)."""
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    hwm = None
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    return maxrss, hwm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="alias or path to a .gguf file")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=LocalModelConfig().n_threads)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--smoke", action="store_true", help="1 run of 8 tokens, no target: it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.runs, args.max_tokens, args.check = 1, 8, False

    config = LocalModelConfig(n_threads=args.threads)
    started = time.perf_counter()
    loaded = load_model(args.model, config)
    load_s = time.perf_counter() - started

    total = Counters(0.0, 0, 0.0, 0)
    wall = 0.0
    for i in range(args.runs):
        loaded.llama.reset()  # no prompt reuse between runs: measure real prompt processing
        _reset_perf(loaded.llama)
        turns = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": PROMPTS[i % len(PROMPTS)]},
        ]
        t0 = time.perf_counter()
        generate(args.model, turns, max_tokens=args.max_tokens, temperature=0.7, seed=i, config=config)
        wall += time.perf_counter() - t0
        run = _perf(loaded.llama)
        total = Counters(
            total.prompt_ms + run.prompt_ms,
            total.prompt_tokens + run.prompt_tokens,
            total.gen_ms + run.gen_ms,
            total.gen_tokens + run.gen_tokens,
        )

    gen_rate = total.gen_tokens / (total.gen_ms / 1000) if total.gen_ms else 0.0
    prompt_rate = total.prompt_tokens / (total.prompt_ms / 1000) if total.prompt_ms else 0.0
    maxrss, hwm = peak_rss_mb()
    rss = max(maxrss, hwm or 0.0)
    results = {
        "model": str(resolve_model_path(args.model)),
        "threads": args.threads,
        "runs": args.runs,
        "load_s": round(load_s, 3),
        "generation_tokens": total.gen_tokens,
        "generation_tokens_per_s": round(gen_rate, 1),
        "prompt_tokens": total.prompt_tokens,
        "prompt_tokens_per_s": round(prompt_rate, 1),
        "wall_s_per_run": round(wall / max(args.runs, 1), 3),
        "peak_rss_mb": round(maxrss, 1),
        "vm_hwm_mb": None if hwm is None else round(hwm, 1),
    }
    ok_speed = gen_rate >= TARGET_GEN_TOKENS_PER_S
    ok_rss = rss < TARGET_RSS_MB
    if args.json:
        print(json.dumps({**results, "targets_met": ok_speed and ok_rss}, indent=2))
    else:
        rows = [
            ("model load", f"{load_s:.2f} s", "", ""),
            ("generation", f"{gen_rate:.1f} tok/s", f">= {TARGET_GEN_TOKENS_PER_S:.0f} tok/s", ok_speed),
            ("prompt processing", f"{prompt_rate:.1f} tok/s", "", ""),
            ("wall time per run", f"{results['wall_s_per_run']:.2f} s", "", ""),
            ("peak RSS (ru_maxrss)", f"{maxrss:.0f} MiB", f"< {TARGET_RSS_MB:.0f} MiB", ok_rss),
            (
                "peak RSS (VmHWM)",
                "n/a" if hwm is None else f"{hwm:.0f} MiB",
                f"< {TARGET_RSS_MB:.0f} MiB",
                ok_rss,
            ),
        ]
        print(f"{Path(results['model']).name}: {args.runs} runs, {args.threads} threads")
        print(f"  {total.gen_tokens} tokens generated, {total.prompt_tokens} prompt tokens processed")
        print(f"{'metric':<22} {'measured':>14} {'target':>16}  ok")
        for name, measured, target, ok in rows:
            mark = "" if ok == "" else ("yes" if ok else "NO")
            print(f"{name:<22} {measured:>14} {target:>16}  {mark}")
    return 0 if (ok_speed and ok_rss) or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
