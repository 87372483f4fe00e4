"""Prompt-lookup decoding (``HARNESSEVOLVE_LOCAL_LOOKUP``) against plain decoding, side by side on
model calls replayed from real rollouts.

The agent's model calls are rebuilt from trajectories (``--trajectories``: a folder of ATIF files,
e.g. a committed compare cell's ``work/test/trajectories/*``) by the one chat<->ATIF mapping
(``train.samples.chat_messages``), each call the messages before one of the agent's replies, in
the order the loop made them (so llama.cpp's prompt cache reuses each prefix as in a rollout), with
the trajectory's own tools, temperature 0 and the loop's ``--max-tokens``. Each configuration
(``--lookups``, 0 = plain) replays the same calls in its own process (the setting is read when the
model loads), one thread, ``--rounds`` times in alternating order; a figure is the median over
rounds of the whole replay's wall time. Printed side by side: seconds, generated tokens per second,
the ratio to plain decoding, and how many replies are identical to plain decoding's (greedy
decoding must not change what the agent does, up to float rounding). The load average is printed
beside the figures: count them from an idle machine only.

    .venv/bin/python benchmarks/perf/lookup_speed.py --model local/qwen2.5-coder-1.5b \\
        --trajectories benchmarks/perf/results/bfcl-1.5b/cells/seed/seed-0/work/test/trajectories/* \\
        --calls 24 --lookups 0,10 --rounds 2 --json benchmarks/perf/results/lookup_speed.json
    .venv/bin/python benchmarks/perf/lookup_speed.py --smoke   # smollm2-135m, 3 calls: it runs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SMOKE_TRAJECTORIES = ROOT / "trajectories" / "bfcl"
"""Committed BFCL reference trajectories: --smoke replays their first calls."""


def replay_calls(folder: Path, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` model calls (messages, tools) from the trajectories in ``folder``, whole
    trajectories first, in file-name order."""
    from harnessevolve.core.atif import load
    from harnessevolve.train.samples import PromptStyle, chat_messages

    calls: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.json")):
        trajectory = load(path)
        tools = list(trajectory.tool_definitions)
        messages = chat_messages(trajectory, PromptStyle(tools=tuple(tools)))
        for index, message in enumerate(messages):
            if message.get("role") == "assistant" and index > 0:
                calls.append({"messages": messages[:index], "tools": tools})
                if len(calls) >= limit:
                    return calls
    return calls


def child(model: str, folder: Path, limit: int, max_tokens: int) -> dict[str, Any]:
    """Replays the calls in this process (its ``HARNESSEVOLVE_LOCAL_LOOKUP`` as set by the parent)."""
    from harnessevolve.models.call import acomplete
    from harnessevolve.models.local import LocalModelConfig, load_model

    calls = replay_calls(folder, limit)
    load_model(model, LocalModelConfig())  # loading is not timed
    texts: list[str] = []
    tokens = 0
    started = time.perf_counter()
    for call in calls:
        reply = asyncio.run(
            acomplete(
                model, call["messages"], tools=call["tools"], temperature=0.0, max_tokens=max_tokens, seed=0
            )
        )
        texts.append(
            json.dumps([reply.content, [[c.name, c.arguments] for c in reply.tool_calls]], default=str)
        )
        tokens += reply.completion_tokens
    return {"seconds": time.perf_counter() - started, "tokens": tokens, "texts": texts, "calls": len(calls)}


def run_child(model: str, folder: Path, limit: int, max_tokens: int, lookup: int) -> dict[str, Any]:
    env = dict(os.environ, HARNESSEVOLVE_LOCAL_LOOKUP=str(lookup), HARNESSEVOLVE_LOCAL_THREADS="1")
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    argv = [sys.executable, __file__, "--child", "--model", model, "--trajectories", str(folder)]
    argv += ["--calls", str(limit), "--max-tokens", str(max_tokens)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"lookup {lookup}: child failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-1.5b")
    parser.add_argument("--trajectories", type=Path, default=None, help="folder of ATIF trajectories")
    parser.add_argument("--calls", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--lookups", default="0,10", help="comma list; 0 = plain decoding")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="smollm2-135m, 3 calls, 1 round")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.model, args.calls, args.rounds, args.max_tokens = "local/smollm2-135m", 3, 1, 32
        if args.trajectories is None:
            args.trajectories = SMOKE_TRAJECTORIES
    if args.trajectories is None or not args.trajectories.is_dir():
        parser.error("--trajectories must name a folder of ATIF trajectories")
    if args.child:
        print(json.dumps(child(args.model, args.trajectories, args.calls, args.max_tokens)))
        return 0
    lookups = [int(x) for x in args.lookups.split(",")]
    if 0 not in lookups:
        lookups.insert(0, 0)
    runs: dict[int, list[dict[str, Any]]] = {n: [] for n in lookups}
    loads = [os.getloadavg()[0]]
    for round_ in range(args.rounds):
        order = lookups if round_ % 2 == 0 else list(reversed(lookups))
        for n in order:
            runs[n].append(run_child(args.model, args.trajectories, args.calls, args.max_tokens, n))
            loads.append(os.getloadavg()[0])
    plain = statistics.median(r["seconds"] for r in runs[0])
    reference = runs[0][0]["texts"]
    rows = []
    print(
        f"{args.model}, {runs[0][0]['calls']} replayed calls, 1 thread, {args.rounds} round(s), "
        f"load average {min(loads):.2f}-{max(loads):.2f}"
    )
    print(f"{'lookup':>6} {'seconds':>8} {'tok/s':>7} {'vs plain':>8} {'same replies':>13}")
    for n in lookups:
        seconds = statistics.median(r["seconds"] for r in runs[n])
        tokens = runs[n][0]["tokens"]
        same = sum(a == b for a, b in zip(runs[n][0]["texts"], reference, strict=True))
        rate = tokens / seconds if seconds else 0.0
        row = {
            "lookup": n,
            "seconds": seconds,
            "tokens": tokens,
            "tokens_per_s": rate,
            "speedup": plain / seconds if seconds else 0.0,
            "same_replies": same,
            "calls": len(reference),
        }
        rows.append(row)
        print(f"{n:>6} {seconds:>8.1f} {rate:>7.2f} {row['speedup']:>7.2f}x {same:>6}/{len(reference)}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "command": shlex.join(
                        ["python", "benchmarks/perf/lookup_speed.py", *(argv or sys.argv[1:])]
                    ),
                    "model": args.model,
                    "trajectories": str(args.trajectories),
                    "rounds": args.rounds,
                    "load_average": [min(loads), max(loads)],
                    "rows": rows,
                    "raw": {
                        str(k): [{kk: vv for kk, vv in r.items() if kk != "texts"} for r in v]
                        for k, v in runs.items()
                    },
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
