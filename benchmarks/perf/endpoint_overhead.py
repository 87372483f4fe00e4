"""Overhead of the recording model endpoint per call, against a direct litellm call, same model.

External agents (``agent.kind: command`` / ``mini-swe-agent``) reach their model only through the
rollout's endpoint (``harnessevolve/execute/runners/endpoint.py``): HTTP over a unix socket, in the
sandbox through a TCP relay. This measures, side by side in one run and on the same scripted model
(``scripted/...``, replies computed instantly, so the model costs nothing and what remains is ours):

- ``direct``: ``harnessevolve.models.acomplete`` in this process (litellm, retries, limits, metering);
- ``endpoint (unix socket)``: a client process POSTs ``/v1/chat/completions`` over the socket
  (keep-alive, httpx), the endpoint forwards through the same ``acomplete`` and records the call;
- ``endpoint (via relay)``: the same through ``unix_relay.py`` on TCP 127.0.0.1, as inside the sandbox.

The three run in alternating blocks; each figure is the median per call over all blocks; the
overhead is the endpoint's median minus direct's. Target: <= 2 ms per call.

    .venv/bin/python benchmarks/perf/endpoint_overhead.py [--calls 300] [--blocks 5] [--check]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harnessevolve.execute.runners.agent_sandbox import RELAY  # noqa: E402
from harnessevolve.execute.runners.endpoint import ModelEndpoint  # noqa: E402
from harnessevolve.models import acomplete  # noqa: E402
from harnessevolve.models.scripted import register_script  # noqa: E402

MODEL = "scripted/endpoint-bench"
TARGET_MS = 2.0
MESSAGES = [
    {"role": "system", "content": "You are an agent working in a folder of files."},
    {"role": "user", "content": "Count the lines in list.txt and submit the number."},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]
CLIENT = r"""
import json, sys, time, httpx
target, calls, body = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
if target.startswith("/"):
    client, url = httpx.Client(transport=httpx.HTTPTransport(uds=target)), "http://endpoint/v1/chat/completions"
else:
    client, url = httpx.Client(), f"http://127.0.0.1:{target}/v1/chat/completions"
client.post(url, json=body).raise_for_status()  # warm-up: connection made
times = []
for _ in range(calls):
    start = time.perf_counter()
    reply = client.post(url, json=body)
    times.append((time.perf_counter() - start) * 1000)
    assert reply.status_code == 200, reply.text
print(json.dumps(times))
"""


def reply(_messages, _tools):
    return {"tool_calls": [{"name": "bash", "arguments": {"command": "wc -l list.txt"}}]}


async def direct(calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await acomplete(MODEL, MESSAGES, tools=TOOLS)
        times.append((time.perf_counter() - start) * 1000)
    return times


async def through_endpoint(calls: int, relay: bool) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="he-bench-") as folder:
        socket_path = Path(folder) / "model.sock"
        async with ModelEndpoint(socket_path, model=MODEL, max_calls=calls + 1) as endpoint:
            relay_proc = None
            target = str(socket_path)
            if relay:
                relay_proc = await asyncio.create_subprocess_exec(  # its serving child stays in this group
                    sys.executable,
                    "-I",
                    str(RELAY),
                    target,
                    stdout=asyncio.subprocess.PIPE,
                    start_new_session=True,
                )
                target = (await relay_proc.stdout.readline()).decode().strip()  # type: ignore[union-attr]
                await relay_proc.wait()
            body = json.dumps({"model": MODEL, "messages": MESSAGES, "tools": TOOLS})
            client = await asyncio.create_subprocess_exec(
                sys.executable, "-c", CLIENT, target, str(calls), body, stdout=asyncio.subprocess.PIPE
            )
            out, _ = await client.communicate()
            assert client.returncode == 0 and len(endpoint.calls) == calls + 1
            assert all(c.status == 200 and c.reply for c in endpoint.calls)  # every call recorded
            if relay_proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(relay_proc.pid, signal.SIGKILL)
            return json.loads(out)


async def measure(calls: int, blocks: int) -> dict[str, list[float]]:
    register_script("endpoint-bench", reply)
    await direct(20)  # litellm imported, price lookup cached
    results: dict[str, list[float]] = {"direct": [], "endpoint (unix socket)": [], "endpoint (via relay)": []}
    for _ in range(blocks):
        results["direct"] += await direct(calls)
        results["endpoint (unix socket)"] += await through_endpoint(calls, relay=False)
        results["endpoint (via relay)"] += await through_endpoint(calls, relay=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per block and path")
    parser.add_argument("--blocks", type=int, default=5, help="alternating blocks")
    parser.add_argument("--check", action="store_true", help="exit 1 when an overhead is over the target")
    parser.add_argument("--smoke", action="store_true", help="10 calls x 1 block: it runs (no target)")
    args = parser.parse_args()
    if args.smoke:
        args.calls, args.blocks, args.check = 10, 1, False
    results = asyncio.run(measure(args.calls, args.blocks))
    base = statistics.median(results["direct"])
    print(
        f"{args.calls} calls x {args.blocks} blocks per path, model {MODEL}, loadavg {os.getloadavg()[0]:.2f}"
    )
    print(f"{'path':<26}{'median ms':>10}{'p90 ms':>9}{'overhead ms':>13}")
    worst = 0.0
    for name, times in results.items():
        median = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1]
        overhead = median - base
        if name != "direct":
            worst = max(worst, overhead)
        print(f"{name:<26}{median:>10.3f}{p90:>9.3f}{'' if name == 'direct' else f'{overhead:+.3f}':>13}")
    verdict = "within" if worst <= TARGET_MS else "OVER"
    print(f"worst overhead {worst:.3f} ms per call: {verdict} the {TARGET_MS:g} ms target")
    return 1 if args.check and worst > TARGET_MS else 0


if __name__ == "__main__":
    sys.exit(main())
