"""Speed of the embedded local model through llama.cpp: builds, CPU variants, threads, models, side by
side in one run, each figure beside the core's own int8 compute limit.

One configuration (as before; SmolLM2-135M by default)::

    python benchmarks/perf/local_model_speed.py [--model M] [--threads T] [--runs 5] [--json] [--check]

Side by side (issue 57): every combination of ``--build`` x ``--variant`` x ``--models`` x
``--threads-list`` x ``--repack``, each in its own process (a process loads one CPU backend), the
whole list ``--rounds`` times in alternating order, prompt evaluation of a ``--prompt-tokens`` prompt
(no cache) and generation measured by llama.cpp's own counters::

    python benchmarks/perf/local_model_speed.py --side-by-side \\
        --build today=installed --build variants=/path/to/site-dir \\
        --models qwen2.5-coder-0.5b,qwen2.5-coder-1.5b --threads-list 1,2 --repack on,off \\
        --out benchmarks/perf/results/local_model_speed.json

A build is ``installed`` (this environment's llama-cpp-python) or a folder holding another
``llama_cpp`` package (``pip install --target DIR wheel``; ``tools/build_llama_cpp.py`` builds both
kinds), put first on the worker's ``PYTHONPATH``. ``--variant`` names CPU backend variants to force
(``HARNESSEVOLVE_LLAMA_CPU_VARIANT``; ``auto``: the best this CPU runs; builds without variants
run ``auto`` only). The compute limit is measured on the spot: ``kernels/int8_peak.c`` (compiled
with the system's C compiler) issues the int8 multiply-accumulate instruction llama.cpp's quantized
dot products use, on each core; a model's prompt-evaluation limit is that rate times the threads
over the multiply-accumulates one token needs (the parameters of its matrix multiplications). The
JSON (``--out``) holds every run's raw figures, the load averages and the machine.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.models.local import LocalModelConfig, generate, load_model, resolve_model_path

TARGET_GEN_TOKENS_PER_S = 60.0
TARGET_RSS_MB = 1024.0
HERE = Path(__file__).resolve().parent
KERNEL = HERE / "kernels" / "int8_peak.c"

PROMPTS = [
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a shell pipeline works, with three examples.",
    "Describe a walk through a forest in autumn, in detail.",
    "List ten ideas for small Python command-line tools and what each does.",
    "Write a letter to a friend about learning to cook.",
]
SYSTEM = "You are a helpful assistant. " + "Answer carefully and completely. " * 40  # ~300 prompt tokens
FILLER = (
    "The shell reads a line, splits it into words, expands variables and globs, sets up redirections "
    "and pipes, and runs each command in its own process; find walks a tree and prints what matches. "
)


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


def _repack_off() -> None:
    """Load models without llama.cpp's repacked CPU weight layouts (``use_extra_bufts``)."""
    import llama_cpp

    default = llama_cpp.llama_model_default_params

    def params() -> Any:
        found = default()
        found.use_extra_bufts = False
        return found

    llama_cpp.llama_model_default_params = params


def matmul_macs_per_token(llama: Any) -> int:
    """Multiply-accumulates one prompt token costs in the matrix multiplications: the parameters
    less the token embedding (a lookup; the output projection runs for the last token only)."""
    import llama_cpp

    model = llama._model.model
    params = int(llama_cpp.llama_model_n_params(model))
    embedding = int(llama_cpp.llama_model_n_embd(model)) * int(llama.n_vocab())
    return max(1, params - embedding)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """One configuration in this process: the figures ``--json`` prints."""
    if args.no_repack:
        _repack_off()
    from harnessevolve.models.llama_variants import ensure_cpu_backend

    backend = ensure_cpu_backend()
    config = LocalModelConfig(
        n_threads=args.threads, n_ctx=max(2048, args.prompt_tokens + args.max_tokens + 64)
    )
    started = time.perf_counter()
    loaded = load_model(args.model, config)
    load_s = time.perf_counter() - started
    llama = loaded.llama
    total = Counters(0.0, 0, 0.0, 0)
    wall = 0.0
    for i in range(args.runs):
        llama.reset()  # no prompt reuse between runs: measure real prompt processing
        _reset_perf(llama)
        system = SYSTEM
        if args.prompt_tokens:
            text = FILLER * (args.prompt_tokens // 20 + 1)
            ids = llama.tokenize(text.encode(), add_bos=False, special=False)[: args.prompt_tokens - 40]
            system = f"(run {i}) " + llama.detokenize(ids).decode("utf-8", errors="ignore")
        turns = [
            {"role": "system", "content": system},
            {"role": "user", "content": PROMPTS[i % len(PROMPTS)]},
        ]
        t0 = time.perf_counter()
        generate(args.model, turns, max_tokens=args.max_tokens, temperature=0.0, seed=i, config=config)
        wall += time.perf_counter() - t0
        run = _perf(llama)
        total = Counters(
            total.prompt_ms + run.prompt_ms,
            total.prompt_tokens + run.prompt_tokens,
            total.gen_ms + run.gen_ms,
            total.gen_tokens + run.gen_tokens,
        )
    gen_rate = total.gen_tokens / (total.gen_ms / 1000) if total.gen_ms else 0.0
    prompt_rate = total.prompt_tokens / (total.prompt_ms / 1000) if total.prompt_ms else 0.0
    maxrss, hwm = peak_rss_mb()
    return {
        "model": str(resolve_model_path(args.model)),
        "variant": backend.variant,
        "features": backend.features,
        "repack": not args.no_repack,
        "threads": args.threads,
        "runs": args.runs,
        "load_s": round(load_s, 3),
        "generation_tokens": total.gen_tokens,
        "generation_tokens_per_s": round(gen_rate, 2),
        "prompt_tokens": total.prompt_tokens,
        "prompt_tokens_per_s": round(prompt_rate, 2),
        "matmul_macs_per_token": matmul_macs_per_token(llama),
        "wall_s_per_run": round(wall / max(args.runs, 1), 3),
        "peak_rss_mb": round(maxrss, 1),
        "vm_hwm_mb": None if hwm is None else round(hwm, 1),
    }


def print_one(results: dict[str, Any], args: argparse.Namespace) -> bool:
    gen_rate, prompt_rate = results["generation_tokens_per_s"], results["prompt_tokens_per_s"]
    maxrss, hwm = results["peak_rss_mb"], results["vm_hwm_mb"]
    ok_speed = gen_rate >= TARGET_GEN_TOKENS_PER_S
    ok_rss = max(maxrss, hwm or 0.0) < TARGET_RSS_MB
    rows = [
        ("model load", f"{results['load_s']:.2f} s", "", ""),
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
    name, variant = Path(results["model"]).name, results["variant"]
    print(f"{name}: {args.runs} runs, {args.threads} threads, CPU backend {variant}")
    generated, prompt = results["generation_tokens"], results["prompt_tokens"]
    print(f"  {generated} tokens generated, {prompt} prompt tokens processed")
    print(f"{'metric':<22} {'measured':>14} {'target':>16}  ok")
    for name, measured, target, ok in rows:
        mark = "" if ok == "" else ("yes" if ok else "NO")
        print(f"{name:<22} {measured:>14} {target:>16}  {mark}")
    return ok_speed and ok_rss


# --- side by side ------------------------------------------------------------------------------------


def compute_limit(cores: int, seconds: float = 2.0) -> dict[str, Any]:
    """int8 multiply-accumulates per second on ``cores`` cores at once (one kernel process each)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return {"kernel": None, "macs_per_s": None, "why": "no C compiler to build kernels/int8_peak.c"}
    with tempfile.TemporaryDirectory() as folder:
        binary = Path(folder) / "int8_peak"
        subprocess.run([compiler, "-O2", "-o", str(binary), str(KERNEL)], check=True)
        procs = [
            subprocess.Popen([str(binary), str(seconds)], stdout=subprocess.PIPE, text=True)
            for _ in range(cores)
        ]
        outs = [p.communicate()[0].split() for p in procs]
    kernel = outs[0][0]
    return {"kernel": kernel, "cores": cores, "macs_per_s": sum(float(o[1]) for o in outs)}


def run_worker(
    build: str, where: str, variant: str, model: str, threads: int, repack: bool, args: Any
) -> dict:
    env = dict(os.environ)
    if where != "installed":
        env["PYTHONPATH"] = os.pathsep.join([where, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("HARNESSEVOLVE_LLAMA_CPU_VARIANT", None)
    if variant != "auto":
        env["HARNESSEVOLVE_LLAMA_CPU_VARIANT"] = variant
    env["HARNESSEVOLVE_LOCAL_POOL"] = "1"
    command = [
        sys.executable,
        __file__,
        "--json",
        "--model",
        model,
        "--threads",
        str(threads),
        "--runs",
        str(args.runs),
        "--max-tokens",
        str(args.max_tokens),
        "--prompt-tokens",
        str(args.prompt_tokens),
    ] + ([] if repack else ["--no-repack"])
    load = os.getloadavg()[0]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
        return {
            "build": build,
            "variant_asked": variant,
            "model": model,
            "threads": threads,
            "repack": repack,
            "error": tail[0],
            "load_1m_before": load,
        }
    found = json.loads(done.stdout)
    return {
        "build": build,
        "variant_asked": variant,
        "load_1m_before": round(load, 2),
        **found,
        "model_name": model,
    }


def side_by_side(args: argparse.Namespace) -> int:
    builds = [b.partition("=")[::2] for b in args.build] or [("installed", "installed")]
    models = [m for m in args.models.split(",") if m]
    threads = [int(t) for t in args.threads_list.split(",")]
    repacks = [r == "on" for r in args.repack.split(",")]
    variants = args.variant or ["auto"]
    configs = list(itertools.product(builds, variants, models, threads, repacks))
    started = datetime.datetime.now(datetime.UTC)
    load_start = os.getloadavg()
    limits = {t: compute_limit(t) for t in sorted(set(threads))}
    runs: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        order = configs if round_ % 2 == 0 else list(reversed(configs))
        for (name, where), variant, model, t, repack in order:
            layout = "on" if repack else "off"
            print(
                f"round {round_ + 1}: {name} {variant} {model} {t} thread(s) repack {layout}",
                file=sys.stderr,
                flush=True,
            )
            runs.append({"round": round_, **run_worker(name, where, variant, model, t, repack, args)})
    limits_after = {t: compute_limit(t) for t in sorted(set(threads))}
    table = summarise(runs, limits, limits_after)
    result = {
        "script": "benchmarks/perf/local_model_speed.py --side-by-side",
        "argv": sys.argv[1:],
        "started": started.isoformat(timespec="seconds"),
        "machine": {"cpu": _cpu_name(), "cores": os.cpu_count(), "platform": platform.platform()},
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "compute_limit_before": limits,
        "compute_limit_after": limits_after,
        "runs": runs,
        "table": table,
    }
    print_table(table, result)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"raw figures: {args.out}")
    return 0


def summarise(runs: list[dict], before: dict, after: dict) -> list[dict[str, Any]]:
    """Median over rounds per configuration, with ratios to the first build and limit shares."""
    keys: dict[tuple, list[dict]] = {}
    for run in runs:
        if "error" in run:
            continue
        keys.setdefault(
            (run["build"], run["variant_asked"], run["model_name"], run["threads"], run["repack"]), []
        ).append(run)
    rows = []
    for key, found in keys.items():
        build, variant, model, threads, repack = key
        limit = max(float(before[threads]["macs_per_s"] or 0), float(after[threads]["macs_per_s"] or 0))
        prompt = statistics.median(r["prompt_tokens_per_s"] for r in found)
        rows.append(
            {
                "build": build,
                "variant_asked": variant,
                "variant": found[0]["variant"],
                "model": model,
                "threads": threads,
                "repack": repack,
                "rounds": len(found),
                "prompt_tokens_per_s": round(prompt, 2),
                "generation_tokens_per_s": round(
                    statistics.median(r["generation_tokens_per_s"] for r in found), 2
                ),
                "prompt_limit_tokens_per_s": round(limit / found[0]["matmul_macs_per_token"], 2)
                if limit
                else None,
                "prompt_share_of_limit": round(prompt * found[0]["matmul_macs_per_token"] / limit, 3)
                if limit
                else None,
            }
        )
    for row in rows:
        base = next((r for r in rows if r["model"] == row["model"] and r["threads"] == row["threads"]), None)
        row["prompt_vs_first"] = (
            round(row["prompt_tokens_per_s"] / base["prompt_tokens_per_s"], 2) if base else None
        )
        row["generation_vs_first"] = (
            round(row["generation_tokens_per_s"] / base["generation_tokens_per_s"], 2) if base else None
        )
    return rows


def print_table(rows: list[dict], result: dict) -> None:
    print(
        f"{result['machine']['cpu']}, {result['machine']['cores']} cores; load average at start "
        f"{result['load_average_start']}, at end {result['load_average_end']}"
    )
    for t, limit in result["compute_limit_before"].items():
        rate = limit["macs_per_s"]
        print(
            f"int8 limit ({limit['kernel']}, {t} core(s)): {rate / 1e9:.1f} G multiply-accumulates/s"
            if rate
            else f"int8 limit: not measured ({limit.get('why')})"
        )
    header = (
        "build",
        "variant",
        "model",
        "thr",
        "repack",
        "prompt tok/s",
        "x first",
        "of limit",
        "gen tok/s",
        "x first",
    )
    print(" | ".join(header))
    for r in rows:
        share = "-" if r["prompt_share_of_limit"] is None else f"{100 * r['prompt_share_of_limit']:.0f}%"
        print(
            " | ".join(
                str(x)
                for x in (
                    r["build"],
                    r["variant"],
                    r["model"],
                    r["threads"],
                    "on" if r["repack"] else "off",
                    f"{r['prompt_tokens_per_s']:.1f}",
                    f"{r['prompt_vs_first']:.2f}",
                    share,
                    f"{r['generation_tokens_per_s']:.1f}",
                    f"{r['generation_vs_first']:.2f}",
                )
            )
        )
    errors = [r for r in result["runs"] if "error" in r]
    for r in errors:
        print(f"failed: {r['build']} {r['variant_asked']} {r['model']} {r['threads']}: {r['error']}")


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="alias or path to a .gguf file")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--prompt-tokens", type=int, default=0, help="a prompt of about this many tokens")
    parser.add_argument("--threads", type=int, default=LocalModelConfig().n_threads)
    parser.add_argument(
        "--no-repack", action="store_true", help="without llama.cpp's repacked weight layouts"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--smoke", action="store_true", help="1 run of 8 tokens, no target: it runs")
    parser.add_argument("--side-by-side", action="store_true", help="compare builds/variants/threads/models")
    parser.add_argument(
        "--build", action="append", default=[], help="NAME=installed or NAME=DIR (repeatable)"
    )
    parser.add_argument("--variant", action="append", default=[], help="auto or a CPU variant (repeatable)")
    parser.add_argument("--models", default="qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    parser.add_argument("--threads-list", default="1,2")
    parser.add_argument("--repack", default="on", help="on, off or on,off")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", help="write the raw figures as JSON here")
    args = parser.parse_args(argv)
    if args.side_by_side:
        if args.smoke:
            args.runs, args.max_tokens, args.prompt_tokens, args.rounds = 1, 4, 64, 1
            args.models, args.threads_list = "smollm2-135m", "1"
        else:
            args.runs, args.max_tokens = min(args.runs, 2), min(args.max_tokens, 64)
            args.prompt_tokens = args.prompt_tokens or 1024
        return side_by_side(args)
    if args.smoke:
        args.runs, args.max_tokens, args.check = 1, 8, False
    results = measure(args)
    if args.json:
        ok = results["generation_tokens_per_s"] >= TARGET_GEN_TOKENS_PER_S
        print(json.dumps({**results, "targets_met": ok}, indent=2))
        return 0
    ok = print_one(results, args)
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
