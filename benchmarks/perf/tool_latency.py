"""Tool-call latency in the sandbox: a stateful Python tool (the rollout's tool server) vs a shell tool.

Both run through the same sandbox the agent loop uses (bubblewrap by default), side by side in one
process, alternating call by call so machine load hits both alike:

- **python**: ``Counter.add`` of a task's Python tool, served by one ``ToolServer`` per rollout
  (one sandboxed Python process; each call is a JSON line there and back, state kept in memory);
- **shell**: a ``command`` tool, ``echo $((ARG_n + 1))``: one sandboxed ``bash -c`` per call
  (what a shell tool, or an emulation that replays state, pays on every call).

Prints the tool server's start-up time and the per-call median, p90 and mean of each, in ms.

    .venv/bin/python benchmarks/perf/tool_latency.py --calls 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from harnessevolve.core.task_tools import ObjectSetup, TaskTool
from harnessevolve.core.tasks import Task
from harnessevolve.execute.tool_server import ToolServer, python_runtime_paths, with_read_only
from harnessevolve.execute.tools import run_tool
from harnessevolve.harness.model import ToolSpec
from harnessevolve.sandbox.base import make_sandbox

COUNTER = """
class Counter:
    def __init__(self):
        self.value = 0

    def add(self, n):
        self.value += n
        return {"value": self.value}
"""
NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def summary(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    return {
        "median_ms": round(statistics.median(ms), 2),
        "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


async def measure(calls: int, sandbox_name: str) -> dict:
    code = Path(tempfile.mkdtemp(prefix="he-latency-code-"))
    code.chmod(0o755)
    (code / "latency_counter.py").write_text(COUNTER)
    (code / "latency_counter.py").chmod(0o644)
    task = Task(
        id="latency",
        instruction="count",
        split="train",
        checks=(),
        tools=(TaskTool("add", "add n", NUMBER, python="latency_counter:Counter.add"),),
        tool_setup=(ObjectSetup("latency_counter:Counter"),),
        python_path=(str(code),),
    )
    sandbox = make_sandbox(sandbox_name, unsafe=sandbox_name == "none")
    sandbox = with_read_only(sandbox, python_runtime_paths() + task.python_path)
    shell = ToolSpec("add_shell", "add n", NUMBER, command="echo $((ARG_n + 1))")
    workspace = Path(tempfile.mkdtemp(prefix="he-latency-ws-"))
    python_s: list[float] = []
    shell_s: list[float] = []
    started = time.perf_counter()
    async with ToolServer.start(task, workspace, sandbox=sandbox, timeout_s=20, limit=2000) as server:
        startup_s = time.perf_counter() - started
        for i in range(calls):
            t = time.perf_counter()
            result = await server.call("add", {"n": 1})
            python_s.append(time.perf_counter() - t)
            assert result.error is None and json.loads(result.output)["value"] == i + 1, result
            t = time.perf_counter()
            out = await run_tool(shell, {"n": i}, workspace, timeout_s=20, limit=2000, sandbox=sandbox)
            shell_s.append(time.perf_counter() - t)
            assert out.error is None and out.output.strip() == str(i + 1), out
    return {
        "sandbox": sandbox.name,
        "calls": calls,
        "tool_server_startup_ms": round(startup_s * 1000, 1),
        "python_tool": summary(python_s),
        "shell_tool": summary(shell_s),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls of each tool")
    parser.add_argument("--sandbox", default="bwrap", help="bwrap (default), docker or none")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--smoke", action="store_true", help="5 calls of each tool: it runs")
    args = parser.parse_args()
    if args.smoke:
        args.calls = 5
    report = asyncio.run(measure(args.calls, args.sandbox))
    if args.json:
        print(json.dumps(report))
        return
    print(f"sandbox {report['sandbox']}, {report['calls']} calls of each tool, alternating")
    print(f"tool server start-up: {report['tool_server_startup_ms']} ms (once per rollout)")
    for name in ("python_tool", "shell_tool"):
        s = report[name]
        line = f"median {s['median_ms']:7.2f} ms   p90 {s['p90_ms']:7.2f} ms   mean {s['mean_ms']:7.2f} ms"
        print(f"{name:12} {line}")
    ratio = report["shell_tool"]["median_ms"] / max(report["python_tool"]["median_ms"], 1e-9)
    print(f"a shell call takes {ratio:.0f}x a Python tool call (medians)")


if __name__ == "__main__":
    main()
