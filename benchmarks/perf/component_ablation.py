"""Each runtime component on and off (docs/runtime.md): test-split pass rate, tokens and seconds
per arm, per seed, with the machine's load average.

Arms, each the template harness plus one component (``base``: none):

- ``memory``: entries distilled by the ``memory`` proposer from this seed's rollouts of the base
  harness on ``--train`` train tasks (passed runs become ``success`` entries, failed ones with an
  error signal ``failure`` entries), ``top_k`` 3; the test tasks never feed it;
- ``recovery``: ``RECOVERY_RULES`` below (a note on a repeated call, on a tool error and on a
  malformed call; stop and submit one step before the limit); a template ``loop.stop_on_repeat``
  of 1 or 2 is raised to 3 in this arm, or it would end the run on the step the note answers;
- ``progress``: the ``notes`` tool;
- ``world_model``: ``WORLD_MODEL`` below, with forecasts checked (accuracy reported).

Every arm is scored with the pipeline's own scorer (agent loop + checkers) on the same test tasks
and seeds (model calls are seeded ``seed + index``); each seed draws its own ``--train`` and
``--test`` tasks (``random.Random(seed)``), the same for every arm of that seed. Seconds are wall
time of scoring that arm's test tasks. ``--smoke`` runs every arm in seconds on scripted models
(``SmokeAgent``): a check that every arm runs and is scored, never a measurement.
The coordinator's measurement, e.g.:

    HARNESSEVOLVE_LOCAL_THREADS=1 .venv/bin/python benchmarks/perf/component_ablation.py \\
        --benchmark bfcl --template tool-agent --model local/qwen2.5-coder-1.5b --seeds 3 \\
        --train 20 --test 20 --out benchmarks/perf/results/component_ablation-bfcl-1.5b.json
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness_arms import make_scorer, score_split  # noqa: E402

from harnessevolve.adapters import load_benchmark_spec  # noqa: E402
from harnessevolve.core import paths  # noqa: E402
from harnessevolve.core.tasks import Task  # noqa: E402
from harnessevolve.evaluate.clustering import cluster_signals  # noqa: E402
from harnessevolve.harness.load import load_harness  # noqa: E402
from harnessevolve.optimize.memory_proposer import MemoryProposer  # noqa: E402
from harnessevolve.optimize.proposal import ProposalContext  # noqa: E402
from harnessevolve.proposing.context import reference_actions  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ARMS = ("base", "memory", "recovery", "progress", "world_model")
RECOVERY_RULES = """recovery:
  rules:
    - event: repeated_call
      times: 2
      action: note
      note: You made the same call twice in a row; its result will not change. Use it, or submit your answer.
    - event: tool_error
      action: note
      max_fires: 2
      note: That call failed. Read the error, fix the arguments or pick another tool.
    - event: malformed_call
      action: retry
      note: Reply with exactly one tool call whose arguments are a JSON object.
    - event: step_limit_near
      within: 1
      action: stop
"""
WORLD_MODEL = """Tools return what they did or found: a listing, a file's text, a count, a state.
A call with a wrong or missing argument returns an error naming it. A call repeated with the same
arguments returns the same result. Submitting ends the task.
"""
SETTINGS = {
    "base": "",
    "memory": "memory:\n  top_k: 3\n",
    "recovery": RECOVERY_RULES,
    "progress": "progress:\n  max_chars: 2000\n",
    "world_model": "world_model:\n  file: world_model.md\n",
}


class SmokeAgent:
    """``--smoke``'s scripted agent: works through a task's gold calls but never submits on its own,
    repeating its last call; it submits the gold answer once a component's note (a user message
    after the first) tells it to. So the recovery arm can pass where the others fail."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        self.tasks = {t.instruction: t for t in tasks}

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        task = next((self.tasks[u] for u in users if u in self.tasks), None)
        if task is None or not task.gold:
            return {"content": "I cannot tell which task this is."}
        if len(users) > 1:  # a note from a component
            submit = next((g for g in task.gold if g.tool == "submit"), None)
            if submit is not None:
                return {"tool_calls": [{"name": "submit", "arguments": dict(submit.arguments)}]}
        calls = [g for g in task.gold if g.tool != "submit"] or list(task.gold)
        done = sum(1 for m in messages if m.get("role") == "assistant")
        call = calls[min(done, len(calls) - 1)]
        return {"tool_calls": [{"name": call.tool, "arguments": dict(call.arguments)}]}


def memory_files(results: Sequence[Any], tasks: Sequence[Task], base_files: dict[str, str]) -> dict[str, str]:
    """The entries the memory proposer distils from the base harness's train rollouts."""
    signals = [r.signal for r in results if r.signal is not None]
    context = ProposalContext(
        files={**base_files, "harness.yaml": base_files["harness.yaml"] + SETTINGS["memory"]},
        editable=("memory/*.yaml",),
        system_prompt_path="",
        examples_path=None,
        clusters=tuple(cluster_signals(signals)) if signals else (),
        instructions={t.id: t.opening_text for t in tasks},
        failed_runs={r.task_id: reference_actions(r.trajectory) for r in results if not r.passed},
        passed_runs={r.task_id: reference_actions(r.trajectory) for r in results if r.passed},
        splits={t.id: str(t.split) for t in tasks},
    )
    files: dict[str, str] = {}
    for _ in range(10):  # the proposer adds at most 5 entries an edit: ask until it has no more
        candidate = asyncio.run(MemoryProposer().propose(context))
        if candidate is None:
            break
        files.update({p: t for p, t in candidate.changes.items() if t is not None})
        context = dataclasses.replace(context, files={**context.files, **files})
    return files


def make_arm(base: Path, arm: str, dest: Path, memory: dict[str, str]) -> Path:
    shutil.copytree(base, dest, ignore=shutil.ignore_patterns(".git", ".harnessevolve"))
    with (dest / "harness.yaml").open("a") as out:
        out.write(SETTINGS[arm])
    if arm == "recovery":  # stop_on_repeat 2 would end the run on the step the note is for
        import yaml

        doc = yaml.safe_load((dest / "harness.yaml").read_text())
        if 0 < doc.get("loop", {}).get("stop_on_repeat", 0) <= 2:
            doc["loop"]["stop_on_repeat"] = 3
            (dest / "harness.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    if arm == "memory":
        for rel, text in memory.items():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_text(text)
    if arm == "world_model":
        (dest / "world_model.md").write_text(WORLD_MODEL)
    return dest


def arm_row(results: Sequence[Any], seconds: float) -> dict[str, Any]:
    row: dict[str, Any] = {
        "pass_rate": sum(r.passed for r in results) / len(results) if results else 0.0,
        "passed": sum(r.passed for r in results),
        "tasks": len(results),
        "tokens": sum(r.tokens for r in results),
        "seconds": round(seconds, 3),
        "infra_failures": sum(1 for r in results if r.infra),
    }
    extras = [r.trajectory.extra for r in results]
    row["recovery_fired"] = sum(len(e.get("recovery") or ()) for e in extras)
    row["memory_used"] = sum(1 for e in extras if (e.get("memory") or {}).get("retrieved"))
    row["component_errors"] = sum(len(e.get("component_errors") or ()) for e in extras)
    worlds = [e["world_model"] for e in extras if isinstance(e.get("world_model"), dict)]
    forecasts = sum(w["forecasts"] for w in worlds)
    row["forecast_accuracy"] = sum(w["matches"] for w in worlds) / forecasts if forecasts else None
    return row


def draw(tasks: Sequence[Task], n: int, seed: int) -> list[Task]:
    """Seed ``seed``'s ``n`` tasks: a sample drawn with ``random.Random(seed)`` (every task when
    ``n`` is 0 or more than there are). At temperature 0 the same tasks would give the same passes
    every seed; a draw per seed makes the seeds' spread say something about the tasks."""
    import random

    pool = list(tasks)
    if n <= 0 or n >= len(pool):
        return pool
    return sorted(random.Random(seed).sample(pool, n), key=lambda t: t.id)


def run_seed(args: argparse.Namespace, seed: int, bench: Any, tmp: Path) -> dict[str, Any]:
    train = draw(bench.split("train"), args.train, seed)
    test = draw(bench.split(args.split), args.test, seed)
    base = tmp / f"seed{seed}" / "template"
    shutil.copytree(paths.builtin_dir("harnesses") / args.template, base)
    scorer = make_scorer(bench, args.model, seed=seed)
    base_harness = load_harness(base)
    train_results = score_split(scorer, base_harness, train, "train") if "memory" in args.arms else []
    memory = memory_files(train_results, train, base_harness.files) if train_results else {}
    rows: dict[str, Any] = {"memory_entries": len(memory), "test_tasks": [t.id for t in test]}
    for arm in args.arms:
        harness = load_harness(make_arm(base, arm, tmp / f"seed{seed}" / arm, memory))
        started = time.monotonic()
        results = score_split(scorer, harness, test, f"{arm} seed {seed}")
        rows[arm] = arm_row(results, time.monotonic() - started)
        print(f"  seed {seed} {arm}: {rows[arm]['passed']}/{rows[arm]['tasks']} passed", flush=True)
    return rows


def summarize(seeds: list[dict[str, Any]], arms: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for arm in arms:
        rates = [s[arm]["pass_rate"] for s in seeds]
        base = [s["base"]["pass_rate"] for s in seeds] if "base" in arms else None
        out[arm] = {
            "pass_rate_mean": sum(rates) / len(rates),
            "pass_rates": rates,
            "delta_vs_base_points": (
                round(100 * (sum(rates) - sum(base)) / len(rates), 2) if base is not None else None
            ),
            "tokens_mean": sum(s[arm]["tokens"] for s in seeds) / len(seeds),
            "seconds_mean": sum(s[arm]["seconds"] for s in seeds) / len(seeds),
        }
    return out


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--benchmark", default="shell-basics", help="a benchmark spec (bfcl, nl2bash:N, a folder)"
    )
    parser.add_argument("--template", default="shell-agent", help="the seed harness (harnesses/<template>)")
    parser.add_argument("--model", default="local/smollm2-135m")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--train", type=int, default=20, help="train tasks memory is distilled from")
    parser.add_argument("--test", type=int, default=20, help="tasks scored per arm")
    parser.add_argument("--split", default="test")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here")
    parser.add_argument("--smoke", action="store_true", help="scripted agent, every arm, in seconds")
    args = parser.parse_args(argv)
    args.arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in args.arms if a not in ARMS]
    if unknown:
        parser.error(f"unknown arm {unknown[0]!r}; choose from {', '.join(ARMS)}")
    return args


def command_line(argv: Sequence[str]) -> str:
    python = os.path.relpath(sys.executable, REPO) if sys.executable.startswith(str(REPO)) else sys.executable
    threads = os.environ.get("HARNESSEVOLVE_LOCAL_THREADS")
    prefix = f"HARNESSEVOLVE_LOCAL_THREADS={threads} " if threads else ""
    return prefix + shlex.join([python, "benchmarks/perf/component_ablation.py", *argv])


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    bench = load_benchmark_spec(args.benchmark)
    if args.smoke:
        from harnessevolve.models.scripted import register_script

        register_script("component-ablation-smoke", SmokeAgent(bench.tasks))
        args.model, args.seeds, args.train, args.test = "scripted/component-ablation-smoke", 2, 3, 3
        args.split = "test" if bench.split("test") else "validation"
    load_start = os.getloadavg()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="he-ablation-") as tmp:
        seeds = [run_seed(args, seed, bench, Path(tmp)) for seed in range(args.seeds)]
    document = {
        "command": command_line(argv),
        "smoke": args.smoke,
        "benchmark": args.benchmark,
        "template": args.template,
        "model": args.model,
        "split": args.split,
        "arms": summarize(seeds, args.arms),
        "seeds": seeds,
        "seconds": round(time.monotonic() - started, 1),
        "load_average": {"start": list(load_start), "end": list(os.getloadavg())},
    }
    for arm, row in document["arms"].items():
        delta = row["delta_vs_base_points"]
        shown = "" if delta is None or arm == "base" else f" ({delta:+.1f} points vs base)"
        print(
            f"{arm:12} pass {row['pass_rate_mean']:.3f}{shown}, {row['tokens_mean']:.0f} tokens, "
            f"{row['seconds_mean']:.1f} s"
        )
    text = json.dumps(document, indent=2, default=str)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
