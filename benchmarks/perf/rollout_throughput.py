"""Rollout throughput of the local executor against a fake OpenAI server with 200 ms latency.

Starts ``fake_openai_server.py`` as a loopback-only subprocess (stopped at exit); every rollout
is the shell-agent harness on a one-file task, model ``openai/fake``: the server answers with a
``bash`` call (``cat a.txt``, run for real through the default execution path) and then a
``submit`` call, so each rollout is 2 agent steps = 2 x 200 ms of model time. Prints:

* rollouts/s at concurrency 1, 8, 32, 64 against the ideal ``c / (2 x 0.2 s)`` (target >= 90% at 64);
* where one agent step's time goes at concurrency 1 (harnessevolve's own code, target <= 2 ms;
  litellm's client; the tool's process; the server), from timers around each layer;
* peak memory at 64 concurrent rollouts (RSS via psutil, Python heap via tracemalloc);
* the same workload through DSPy (``dspy.Evaluate(num_threads=c)`` over a ``dspy.Module`` making
  the same two LM calls and the same bash command) and harnessevolve/DSPy throughput ratios.

* the whole machine's CPU per rollout and share of the cores busy at the top concurrency, each engine
  (``/proc/stat``: every process, the fake server's included): a machine all busy caps any engine;
* the targets at the top concurrency, each with its verdict: >= 1.2x DSPy, >= 90% of litellm's
  client ceiling (``litellm.acompletion`` alone, in this one process, at the same concurrency, two
  calls a rollout), cores used >= DSPy's (the whole machine's busy cores during each engine's batch,
  ``/proc/stat``). They are measured side by side: ``--pairs N`` (default 3)
  times over, a batch of harnessevolve (``--executor processes``; ``local`` with
  ``--no-processes``), one of DSPy and one of litellm alone, in a rotating order; each run's ratios
  are printed and the verdicts take their medians (the table's top row shows the median batches,
  and its procs/dspy the median of the paired ratios, the verdict's figure).
  A shared machine's slow minute then weighs on one run of the three, not on one engine.

    .venv/bin/python benchmarks/perf/rollout_throughput.py [--quick | --smoke] [--rounds N] [--pairs N]
                                                           [--ray] [--workers N] [--sandbox none]

``--rounds N``: rollouts per point = concurrency x N (default 6, ``--quick`` 2); more rounds weigh
the ramp at the start of a batch less.

``--smoke`` (seconds; the test suite runs it) measures concurrency 1 and 4 with a few rollouts each:
it checks that every step of the script runs, its figures mean nothing.

``--ray`` adds RayExecutor on a local Ray instance (one actor, i.e. one event loop, per CPU).
Measurements are only as good as the machine is idle: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dspy_workload import dspy_evaluate  # noqa: E402
from fake_openai_server import BASH_COMMAND, FakeServer  # noqa: E402

from harnessevolve.core import paths  # noqa: E402
from harnessevolve.core.tasks import Check, Task  # noqa: E402
from harnessevolve.execute import agent as agent_module  # noqa: E402
from harnessevolve.execute import executor as executor_module  # noqa: E402
from harnessevolve.execute.executor import LocalExecutor, Rollout  # noqa: E402
from harnessevolve.execute.workspace import remove_workspace  # noqa: E402
from harnessevolve.harness.load import load_harness  # noqa: E402
from harnessevolve.models.registry import litellm_module  # noqa: E402

LATENCY = 0.2
STEPS = 2
MODEL = "openai/fake"
WORD = "maple"
HARNESS = load_harness(paths.builtin_dir("harnesses") / "shell-agent")
CONCURRENCIES = (1, 8, 32, 64)


def tasks(n: int, prefix: str) -> list[Task]:
    return [
        Task(
            id=f"{prefix}{i}",
            instruction="What word is in a.txt? Submit it.",
            split="train",
            checks=(Check(type="answer", expected=WORD),),
            setup_files={"a.txt": f"{WORD}\n"},
        )
        for i in range(n)
    ]


def pick_sandbox(name: str | None) -> tuple[Any, str]:
    """The sandbox every tool command runs in (harnessevolve's and DSPy's alike) and its description."""
    from harnessevolve.sandbox.base import default_sandbox, make_sandbox

    sandbox = default_sandbox() if name is None else make_sandbox(name, unsafe=name == "none")
    how = "the default" if name is None else "--sandbox"
    return sandbox, f"{sandbox.name} ({type(sandbox).__name__}, {how})"


class CpuClock:
    """CPU seconds of this process and its finished children (the tool commands)."""

    def __enter__(self) -> CpuClock:
        self.start = os.times()
        return self

    def __exit__(self, *_: object) -> None:
        end = os.times()
        self.own = (end.user - self.start.user) + (end.system - self.start.system)
        self.children = (end.children_user - self.start.children_user) + (
            end.children_system - self.start.children_system
        )


class MachineClock:
    """The whole machine's busy and total CPU time (``/proc/stat``, every process: the fake server,
    workers, sandboxes) over a block; ``busy`` (fraction of all cores) is None where there is no
    /proc/stat."""

    @staticmethod
    def read() -> tuple[int, int] | None:
        try:
            with open("/proc/stat") as f:
                ticks = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        return sum(ticks) - ticks[3] - ticks[4], sum(ticks)  # less idle and iowait

    def __enter__(self) -> MachineClock:
        self.start = self.read()
        self.busy: float | None = None
        return self

    def __exit__(self, *_: object) -> None:
        end = self.read()
        if self.start and end and end[1] > self.start[1]:
            self.busy = (end[0] - self.start[0]) / (end[1] - self.start[1])


def machine_figures(result: dict[str, Any], clock: MachineClock) -> dict[str, Any]:
    """``result`` with the machine's share busy and machine CPU ms per rollout added."""
    if clock.busy is not None:
        cores = os.cpu_count() or 1
        result["machine_busy"] = clock.busy
        result["machine_ms"] = clock.busy * cores * result["wall"] / result["n"] * 1000
    return result


def remove_its_workspace(rollout: Rollout) -> None:
    """As the scorer does once a rollout is checked: its workspace goes as soon as it ends (kept to the
    batch's end, a thousand workspace mounts would slow every sandbox launch's mount-table read)."""
    if rollout.workspace:
        remove_workspace(rollout.workspace)


async def run_batch(
    n: int, concurrency: int, prefix: str, sandbox: Any, executor: Any = None
) -> dict[str, Any]:
    executor = executor or LocalExecutor(concurrency, sandbox=sandbox)
    with CpuClock() as cpu, MachineClock() as machine:
        started = time.perf_counter()
        rollouts: list[Rollout] = await executor.run(
            HARNESS, tasks(n, prefix), model=MODEL, seed=0, on_done=remove_its_workspace
        )
        wall = time.perf_counter() - started
    right = sum(r.answer == WORD for r in rollouts)
    steps = sum(len(r.trajectory.agent_steps) for r in rollouts)
    bad = [r.stop_reason for r in rollouts if r.answer != WORD]
    cpu_s = cpu.own + cpu.children
    result = {"n": n, "wall": wall, "right": right, "steps": steps, "cpu_s": cpu_s, "bad": bad[:3]}
    return machine_figures(result, machine)


# --- where one step's time goes (concurrency 1) -------------------------------------------------------


def timed(totals: dict[str, list[float]], key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            totals[key].append(time.perf_counter() - started)

    return wrapper


def first_request() -> dict[str, Any]:
    return {
        "messages": [
            {"role": "system", "content": HARNESS.assembled_prompt()},
            {"role": "user", "content": "What word is in a.txt? Submit it."},
        ],
        "tools": [t.openai_schema() for t in HARNESS.tools],
    }


async def raw_round_trips(api_base: str, n: int) -> list[float]:
    """The same request by a bare aiohttp client: server latency + loopback HTTP, no SDK."""
    import aiohttp

    body = {"model": "fake", **first_request()}
    times = []
    async with aiohttp.ClientSession() as session:
        for _ in range(n):
            started = time.perf_counter()
            async with session.post(f"{api_base}/chat/completions", json=body) as response:
                await response.json()
            times.append(time.perf_counter() - started)
    return times


async def loop_lag(stop: asyncio.Event, lags: list[float], tick: float = 0.005) -> None:
    """How late a ``tick``-second sleep wakes up, over and over: the time the event loop was busy or
    blocked when it could have run a ready rollout (the serialization one process's loop causes)."""
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(tick)
        lags.append(time.perf_counter() - started - tick)


async def breakdown(n: int, concurrency: int, api_base: str, sandbox: Any) -> dict[str, float]:
    """Where a step's wall time goes with ``concurrency`` rollouts at once (timers around each layer,
    summed over rollouts, so at concurrency > 1 a part includes its waits for the loop)."""
    litellm = litellm_module()
    totals: dict[str, list[float]] = defaultdict(list)
    saved = (
        executor_module.run_one,
        executor_module.create_workspace,
        agent_module.acomplete,
        agent_module.dispatch,
        litellm.acompletion,
    )
    executor_module.run_one = timed(totals, "rollout", saved[0])
    executor_module.create_workspace = timed(totals, "workspace", saved[1])
    agent_module.acomplete = timed(totals, "acomplete", saved[2])
    agent_module.dispatch = timed(totals, "tool", saved[3])
    litellm.acompletion = timed(totals, "litellm", saved[4])
    stop, lags = asyncio.Event(), []
    ticker = asyncio.ensure_future(loop_lag(stop, lags))
    try:
        batch = await run_batch(n, concurrency, f"b{concurrency}-", sandbox)
    finally:
        stop.set()
        await ticker
        (
            executor_module.run_one,
            executor_module.create_workspace,
            agent_module.acomplete,
            agent_module.dispatch,
            litellm.acompletion,
        ) = saved
    raw = statistics.median(await raw_round_trips(api_base, 10))
    steps = batch["steps"]
    total = {k: sum(v) for k, v in totals.items()}
    loop_own = total["rollout"] - total["workspace"] - total["acomplete"] - total["tool"]
    wrapper_own = total["acomplete"] - total["litellm"]
    return {
        "step_wall": total["rollout"] / steps,
        "own": (loop_own + wrapper_own) / steps,
        "loop_own": loop_own / steps,
        "acomplete_own": wrapper_own / steps,
        "workspace": total["workspace"] / steps,
        "tool": total["tool"] / steps,
        "litellm_client": total["litellm"] / steps - raw,
        "server_and_http": raw,
        "loop_lag": statistics.fmean(lags) if lags else 0.0,
        "rate": batch["n"] / batch["wall"],
    }


async def litellm_rate(concurrency: int, n: int) -> tuple[float, float]:
    """litellm.acompletion alone, ``concurrency`` at once: calls/s and CPU ms per call (its ceiling)."""
    litellm = litellm_module()
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await litellm.acompletion(model=MODEL, **first_request())

    await asyncio.gather(*(one() for _ in range(concurrency)))  # untimed: this event loop's HTTP clients
    with CpuClock() as cpu:
        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        wall = time.perf_counter() - started
    return n / wall, cpu.own / n * 1000


# --- memory at 64 ---------------------------------------------------------------------------------------


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


async def memory_at(concurrency: int, sandbox: Any) -> dict[str, float]:
    peak = {"rss": rss_mb()}
    baseline = peak["rss"]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak["rss"] = max(peak["rss"], rss_mb())
            stop.wait(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        await run_batch(concurrency, concurrency, "m", sandbox)
    finally:
        stop.set()
        sampler.join()
    tracemalloc.start()
    await run_batch(concurrency, concurrency, "h", sandbox)
    _, heap_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"baseline": baseline, "peak": peak["rss"], "heap_peak": heap_peak / 2**20}


async def spawn_rate(concurrency: int, n: int, sandbox: Any) -> float:
    """Tool commands per second with nothing else running: the ceiling process spawning sets."""
    from harnessevolve.execute.tools import run_shell

    workspace = Path(tempfile.mkdtemp(prefix="he-spawn-"))
    (workspace / "a.txt").write_text(f"{WORD}\n")
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await run_shell(BASH_COMMAND, workspace, timeout_s=20, limit=2000, sandbox=sandbox)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    wall = time.perf_counter() - started
    shutil.rmtree(workspace, ignore_errors=True)
    return n / wall


def print_targets(top: int, found: dict[str, list[Any]], engine: str, sandbox_name: str) -> None:
    """The issue's targets at the top concurrency with verdicts, from ``paired_top``'s figures: >= 1.2x
    DSPy, >= 90% of litellm's client ceiling, cores used >= DSPy's; each pair, then the medians."""

    def rate(r: dict[str, Any]) -> float:
        return r["n"] / r["wall"]

    def cores(r: dict[str, Any]) -> float:
        """The whole machine's cores busy during the batch (``/proc/stat``), else the process tree's:
        the tree misses sandbox processes that outlive their parent and are reaped by init."""
        if r.get("machine_busy") is not None:
            return float(r["machine_busy"]) * (os.cpu_count() or 1)
        return float(r["cpu_s"]) / r["wall"]

    def verdict(met: bool) -> str:
        return "met" if met else "NOT met"

    ours, theirs, ceilings = found["ours"], found["dspy"], found["ceiling"]
    print(
        f"\ntargets at {top} concurrent rollouts, sandbox {sandbox_name}, harnessevolve --executor {engine}; "
        f"{len(ours)} alternating run(s) of each"
    )
    for i, r in enumerate(ours):
        line = f"  run {i + 1}: harnessevolve {rate(r):5.1f}/s, {cores(r):.2f} cores busy"
        line += f" | litellm ceiling {ceilings[i][0]:5.1f} rollouts/s ({ceilings[i][1]:.1f} ms CPU a call)"
        line += f" -> {rate(r) / ceilings[i][0]:4.0%}"
        if theirs:
            t = theirs[i]
            line += f" | DSPy {rate(t):5.1f}/s, {cores(t):.2f} -> {rate(r) / rate(t):.2f}x"
        print(line)
    share = statistics.median(rate(r) / c[0] for r, c in zip(ours, ceilings, strict=True))
    print(f"  of litellm's client ceiling, median: {share:.0%} (target >= 90%: {verdict(share >= 0.9)})")
    if not theirs:
        print("  vs DSPy: not measured (--no-dspy)")
        return
    ratio = paired_median(ours, theirs)
    print(f"  vs DSPy, median: {ratio:.2f}x (target >= 1.2x: {verdict(ratio >= 1.2)})")
    used = statistics.median(cores(r) - cores(t) for r, t in zip(ours, theirs, strict=True))
    print(
        f"  cores busy (the machine's, /proc/stat) minus DSPy's, median: {used:+.2f} "
        f"(target >= 0: {verdict(used >= 0)})"
    )


# --- main -----------------------------------------------------------------------------------------------


def ray_rows(
    api_base: str, rounds: int, sandbox: Any, concurrencies: tuple[int, ...]
) -> dict[int, dict[str, Any]]:
    """RayExecutor on a local Ray instance: one actor (event loop) per CPU, same workload."""
    import ray

    from harnessevolve.execute.ray_executor import RayExecutor

    keys = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE")
    cpus = os.cpu_count() or 1
    ray.init(
        num_cpus=cpus,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {k: os.environ[k] for k in keys}},
    )
    rows = {}
    try:
        for c in concurrencies[1:]:
            executor = RayExecutor(c, sandbox=sandbox, rollouts_per_worker=max(1, c // cpus))
            asyncio.run(run_batch(c, c, f"rw{c}-", sandbox, executor))  # actors start, import litellm
            rows[c] = asyncio.run(run_batch(c * rounds, c, f"r{c}-", sandbox, executor))
            executor.close()
    finally:
        ray.shutdown()
    return rows


def worker_cpu(executor: Any) -> float:
    """CPU seconds so far of a ProcessExecutor's live workers and their finished children."""
    import psutil

    total = 0.0
    for pid in executor.worker_pids():
        t = psutil.Process(pid).cpu_times()
        total += t.user + t.system + t.children_user + t.children_system
    return total


def process_rows(
    rounds: int, sandbox: Any, concurrencies: tuple[int, ...], workers: int | None = None
) -> dict[int, dict[str, Any]]:
    """harnessevolve's ``processes`` executor (one worker process and event loop per CPU, or
    ``workers``), same workload; cores count this process, the workers and their tool commands."""
    from harnessevolve.execute.process_executor import ProcessExecutor

    rows = {}
    for c in concurrencies:
        executor = ProcessExecutor(c, sandbox=sandbox, workers=workers)
        try:
            asyncio.run(run_batch(c, c, f"pw{c}-", sandbox, executor))  # workers start, import litellm
            rows[c] = process_batch(executor, c * rounds, c, f"p{c}-", sandbox)
        finally:
            executor.close()
    return rows


def process_batch(executor: Any, n: int, concurrency: int, prefix: str, sandbox: Any) -> dict[str, Any]:
    """One batch on a started ProcessExecutor, its workers' CPU counted in ``cpu_s``."""
    before = worker_cpu(executor)
    result = asyncio.run(run_batch(n, concurrency, prefix, sandbox, executor))
    result["cpu_s"] += worker_cpu(executor) - before
    return result


def paired_top(
    top: int,
    rounds: int,
    pairs: int,
    sandbox: Any,
    api_base: str,
    *,
    dspy: bool,
    processes: bool,
    workers: int | None,
) -> dict[str, list[Any]]:
    """The targets' figures at ``top``, taken side by side: ``pairs`` times over, harnessevolve's
    batch (``processes``, else ``local``), DSPy's batch and litellm's ceiling (``litellm.acompletion``
    alone, two calls per rollout), each ``top x rounds`` rollouts, in an order that rotates each
    time; the verdicts use the median of the paired ratios, so a slow minute of a shared machine
    weighs on one pair, not on one engine."""
    from harnessevolve.execute.process_executor import ProcessExecutor

    n = top * rounds
    executor = ProcessExecutor(top, sandbox=sandbox, workers=workers) if processes else None
    found: dict[str, list[Any]] = {"ours": [], "dspy": [], "ceiling": []}
    try:
        if executor is not None:
            asyncio.run(run_batch(top, top, f"pw{top}-", sandbox, executor))  # workers start

        def ours(i: int) -> None:
            if executor is not None:
                found["ours"].append(process_batch(executor, n, top, f"p{top}-{i}-", sandbox))
            else:
                found["ours"].append(asyncio.run(run_batch(n, top, f"c{top}-{i}-", sandbox)))

        def theirs(_i: int) -> None:
            with MachineClock() as machine:
                result = dspy_evaluate(HARNESS, MODEL, WORD, api_base, n, top, sandbox)
            found["dspy"].append(machine_figures(result, machine))

        def ceiling(_i: int) -> None:
            calls, cpu_ms = asyncio.run(litellm_rate(top, STEPS * n))
            found["ceiling"].append((calls / STEPS, cpu_ms))

        parts = [ours, ceiling] + ([theirs] if dspy else [])
        for i in range(pairs):
            for part in parts[i % len(parts) :] + parts[: i % len(parts)]:
                part(i)
    finally:
        if executor is not None:
            executor.close()
    return found


def paired_median(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> float:
    """The median over the alternating runs of harnessevolve's rollouts/s over DSPy's in the same run."""
    return statistics.median(
        (r["n"] / r["wall"]) / (t["n"] / t["wall"]) for r, t in zip(ours, theirs, strict=True)
    )


def median_by_rate(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The batch with the median rollouts/s (the lower middle one of an even count)."""
    ranked = sorted(results, key=lambda r: r["n"] / r["wall"])
    return ranked[(len(ranked) - 1) // 2]


def print_table(
    rows: list[tuple[int, dict[str, Any], dict[str, Any] | None]],
    ray: dict[int, Any],
    procs: dict[int, Any],
) -> None:
    print("\nthroughput (rollouts/s); cores = CPU seconds used per wall second (process + its commands)")
    print("harnessevolve: --executor local (one event loop) | processes (a worker loop per CPU)")
    print(
        f"{'conc':>5} {'rollouts':>8} {'local':>6} {'ideal':>6} {'effic.':>6} {'cpu ms/step':>11} "
        f"{'cores':>5} | {'dspy':>6} {'ok':>4} {'cpu ms/step':>11} {'cores':>5} | {'he/dspy':>7}"
        + (f" | {'ray':>6} {'effic.':>6}" if ray else "")
        + (f" | {'procs':>6} {'effic.':>6} {'cores':>5} {'procs/dspy':>10}" if procs else "")
    )
    for c, ours, theirs in rows:
        rate = ours["n"] / ours["wall"]
        ideal = c / (STEPS * LATENCY)
        line = (
            f"{c:>5} {ours['n']:>8} {rate:>6.1f} {ideal:>6.1f} {rate / ideal:>6.0%} "
            f"{ours['cpu_s'] / ours['steps'] * 1000:>11.1f} {ours['cpu_s'] / ours['wall']:>5.2f} | "
        )
        if theirs:
            theirs_rate = theirs["n"] / theirs["wall"]
            versus = ours.get("paired_ratio", rate / theirs_rate)
            line += (
                f"{theirs_rate:>6.1f} {theirs['score']:>3.0f}% "
                f"{theirs['cpu_s'] / (theirs['n'] * STEPS) * 1000:>11.1f} "
                f"{theirs['cpu_s'] / theirs['wall']:>5.2f} | {versus:>6.2f}x"
            )
        else:
            line += f"{'-':>6} {'-':>4} {'-':>11} {'-':>5} | {'-':>7}"
        if c in ray:
            ray_rate = ray[c]["n"] / ray[c]["wall"]
            line += f" | {ray_rate:>6.1f} {ray_rate / ideal:>6.0%}"
        if procs:
            line += " | "
            if c in procs:
                p_rate = procs[c]["n"] / procs[c]["wall"]
                p_versus = f"{'-':>10}"
                if theirs:
                    ratio = procs[c].get("paired_ratio", p_rate / (theirs["n"] / theirs["wall"]))
                    p_versus = f"{ratio:>9.2f}x"
                p_cores = procs[c]["cpu_s"] / procs[c]["wall"]
                line += f"{p_rate:>6.1f} {p_rate / ideal:>6.0%} {p_cores:>5.2f} {p_versus}"
            else:
                line += f"{'-':>6} {'-':>6} {'-':>5} {'-':>10}"
        print(line)
        for result in (ours, ray.get(c), procs.get(c)):
            if result and result["right"] != result["n"]:
                print(f"      ! {result['n'] - result['right']} rollouts wrong, e.g. {result['bad']}")


def print_machine(
    top: int, rows: list[tuple[int, dict[str, Any], dict[str, Any] | None]], procs: dict[int, Any]
) -> None:
    """At the top concurrency: the whole machine's CPU per rollout and share busy, each engine (a
    machine that is all busy caps every engine; the fake server's share is in every figure)."""
    ours, theirs = next(((o, t) for c, o, t in rows if c == top), ({}, None))
    parts = [("local", ours), ("processes", procs.get(top) or {}), ("dspy", theirs or {})]
    shown = [
        f"{name} {r['machine_ms']:.1f} ms, {r['machine_busy']:.0%} busy"
        for name, r in parts
        if r.get("machine_ms")
    ]
    if shown:
        print(f"machine CPU per rollout at {top} (all processes, /proc/stat): " + " | ".join(shown))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rollouts per point; skips DSPy at 1")
    parser.add_argument("--smoke", action="store_true", help="concurrency 1 and 4, a few rollouts: it runs")
    parser.add_argument("--no-dspy", action="store_true", help="skip the DSPy comparison")
    parser.add_argument("--ray", action="store_true", help="also measure RayExecutor (local instance)")
    parser.add_argument(
        "--no-processes", action="store_true", help="skip the processes executor (a worker per CPU)"
    )
    parser.add_argument("--sandbox", help="bwrap, docker or none (unsafe); default: harnessevolve's default")
    parser.add_argument(
        "--workers", type=int, help="worker processes of the processes executor (default: one per CPU)"
    )
    parser.add_argument(
        "--rounds", type=int, help="rollouts per point = concurrency x rounds (default 6; --quick 2)"
    )
    parser.add_argument(
        "--pairs",
        type=int,
        help="alternating runs of harnessevolve, DSPy and litellm's ceiling at the top concurrency "
        "(default 3; --smoke 1)",
    )
    args = parser.parse_args()
    rounds = args.rounds or (1 if args.smoke else 2 if args.quick else 6)
    pairs = args.pairs or (1 if args.smoke else 3)
    concurrencies = (1, 4) if args.smoke else CONCURRENCIES
    top = concurrencies[-1]
    quick = args.quick or args.smoke

    warnings.filterwarnings("ignore", category=DeprecationWarning, module="dspy")
    warnings.filterwarnings("ignore", message="Passing OpenAI-style message")
    logging.getLogger("dspy").setLevel(logging.WARNING)
    os.environ["OPENAI_API_KEY"] = "dummy"  # this process only; the fake server ignores it
    sandbox, sandbox_name = pick_sandbox(args.sandbox)
    with FakeServer(LATENCY) as server:
        os.environ["OPENAI_BASE_URL"] = os.environ["OPENAI_API_BASE"] = server.api_base
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"fake server {server.api_base} (latency {LATENCY * 1000:.0f} ms, {STEPS} steps per rollout)")
        print(f"tool command: `{BASH_COMMAND}`; sandbox: {sandbox_name}")
        print(f"cpus: {os.cpu_count()}; load average before: {load}")
        asyncio.run(run_batch(4, 4, "w", sandbox))  # warm-up: imports, HTTP client

        m = asyncio.run(memory_at(top, sandbox))
        rows = []
        for c in concurrencies:
            n = c * rounds if c > 1 else (2 if args.smoke else 4 if args.quick else 10)
            if c == top and args.no_processes:  # local is the engine of the targets: measured in pairs
                rows.append((c, {}, None))
                continue
            ours = asyncio.run(run_batch(n, c, f"c{c}-", sandbox))
            theirs = None
            if not args.no_dspy and not (quick and c == 1) and c != top:  # top: in pairs, below
                with MachineClock() as machine:
                    theirs = dspy_evaluate(HARNESS, MODEL, WORD, server.api_base, n, c, sandbox)
                theirs = machine_figures(theirs, machine)
            rows.append((c, ours, theirs))
        ray = ray_rows(server.api_base, rounds, sandbox, concurrencies) if args.ray else {}
        below_top = concurrencies[1:-1]
        procs = {} if args.no_processes else process_rows(rounds, sandbox, below_top, args.workers)
        found = paired_top(
            top,
            rounds,
            pairs,
            sandbox,
            server.api_base,
            dspy=not args.no_dspy,
            processes=not args.no_processes,
            workers=args.workers,
        )
        engine = "local" if args.no_processes else "processes"
        at_top = dict(median_by_rate(found["ours"]))
        if found["dspy"]:  # the verdict's figure: the median of the paired ratios
            at_top["paired_ratio"] = paired_median(found["ours"], found["dspy"])
        if args.no_processes:
            rows[-1] = (top, at_top, rows[-1][2])
        else:
            procs[top] = at_top
        if found["dspy"]:
            rows[-1] = (top, rows[-1][1], median_by_rate(found["dspy"]))
        print_table(rows, ray, procs)
        print(
            f"(at {top}: DSPy and {engine} are the median batches of the {pairs} alternating run(s) of the "
            f"targets below; {engine}'s ratio to DSPy is the median of their paired ratios)"
        )
        print_machine(top, rows, procs)

        n_one = 2 if args.smoke else 4 if args.quick else 10
        one = asyncio.run(breakdown(n_one, 1, server.api_base, sandbox))
        many = asyncio.run(breakdown(top * rounds, top, server.api_base, sandbox))
        rates = f"rollouts/s {one['rate']:.1f} | {many['rate']:.1f}"
        print(f"\none agent step (ms), at concurrency 1 | {top}  ({rates})")
        b = one
        lines = [
            ("wall per step", b["step_wall"], ""),
            ("- server latency + loopback HTTP", b["server_and_http"], "(bare aiohttp client)"),
            ("- litellm client (acompletion)", b["litellm_client"], ""),
            (f"- tool command ({sandbox.name} sandbox)", b["tool"], ""),
            ("- workspace setup (per step)", b["workspace"], ""),
            ("event loop late per 5 ms sleep", b["loop_lag"], "(busy or blocked)"),
            ("= harnessevolve's own code", b["own"], "(target <= 2 ms)"),
            ("    agent loop, executor", b["loop_own"], ""),
            ("    acomplete() around litellm", b["acomplete_own"], ""),
            (f"engine overhead (wall - {LATENCY * 1000:.0f} ms)", b["step_wall"] - LATENCY, ""),
        ]
        keys = ["step_wall", "server_and_http", "litellm_client", "tool", "workspace", "loop_lag", "own"]
        keys += ["loop_own", "acomplete_own", "step_wall"]
        for (label, seconds, note), key in zip(lines, keys, strict=True):
            later = many[key] - (LATENCY if label.startswith("engine") else 0.0)
            print(f"  {label:<38}{seconds * 1000:8.2f} | {later * 1000:8.2f}  {note}".rstrip())

        spawns = asyncio.run(spawn_rate(top, top * rounds, sandbox))
        calls = STEPS * statistics.median(rate for rate, _ in found["ceiling"])
        call_cpu = statistics.median(cpu for _, cpu in found["ceiling"])
        print(f"\nceilings at concurrency {top}, each part alone (rollout = 1 tool command + 2 model calls)")
        print(f"  tool commands (run_shell, {sandbox.name}): {spawns:6.0f}/s -> {spawns:6.0f} rollouts/s")
        print(
            f"  litellm.acompletion (median):   {calls:6.0f}/s -> {calls / STEPS:6.0f} rollouts/s "
            f"({call_cpu:.1f} ms CPU per call)"
        )
        print_targets(top, found, engine, sandbox.name)
        print(
            f"\nmemory at {top} concurrent rollouts: RSS {m['baseline']:.0f} MiB after warm-up, "
            f"{m['peak']:.0f} MiB peak (+{(m['peak'] - m['baseline']) / top * 1024:.0f} KiB per rollout); "
            f"Python heap peak {m['heap_peak']:.1f} MiB (tracemalloc)"
        )
        print(
            f"requests served: {server.requests()}; load average after: "
            + ", ".join(f"{x:.1f}" for x in os.getloadavg())
        )


if __name__ == "__main__":
    main()
