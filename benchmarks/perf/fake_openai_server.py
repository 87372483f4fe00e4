"""A fake OpenAI-compatible chat server with a fixed latency, for throughput measurements.

``POST /v1/chat/completions`` waits ``latency`` seconds (asyncio, so requests overlap) and answers
with one tool call in OpenAI format, from a tiny deterministic script per conversation: before
any tool result it calls ``bash`` (``BASH_COMMAND``), after one it calls ``submit`` with the first
word of that result. ``GET /stats`` counts requests. Loopback only.

Run as a script it serves in this process and prints ``PORT <n>`` once listening; from Python,
``FakeServer`` starts it as a subprocess (its own CPU and GIL) and stops it on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from typing import Any

BASH_COMMAND = "cat a.txt"
HOST = "127.0.0.1"


def reply_for(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The next tool call of the conversation: bash first, then submit what bash printed."""
    results = [m for m in messages if m.get("role") == "tool"]
    if not results:
        return "bash", {"command": BASH_COMMAND}
    words = str(results[-1].get("content") or "").split()
    return "submit", {"answer": words[0] if words else ""}


def completion(body: dict[str, Any], turn_id: int) -> dict[str, Any]:
    name, arguments = reply_for(body.get("messages") or [])
    return {
        "id": f"chatcmpl-fake-{turn_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call_{turn_id}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


async def serve(port: int, latency: float) -> None:
    from aiohttp import web

    requests = 0

    async def chat(request: web.Request) -> web.Response:
        nonlocal requests
        requests += 1
        turn_id = requests
        body = await request.json()
        await asyncio.sleep(latency)
        return web.json_response(completion(body, turn_id))

    async def stats(_: web.Request) -> web.Response:
        return web.json_response({"requests": requests})

    app = web.Application()
    app.add_routes([web.post("/v1/chat/completions", chat), web.get("/stats", stats)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, HOST, port, backlog=1024)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"PORT {bound}", flush=True)
    await asyncio.Event().wait()


class FakeServer:
    """The server as a subprocess: ``with FakeServer(0.2) as server: server.api_base``."""

    def __init__(self, latency: float = 0.2) -> None:
        self.latency = latency
        self.process: subprocess.Popen[str] | None = None
        self.port = 0

    @property
    def api_base(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def __enter__(self) -> FakeServer:
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--latency", str(self.latency)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("PORT "):
            self.__exit__()
            raise RuntimeError(f"fake server did not start: {line!r}")
        self.port = int(line.split()[1])
        return self

    def requests(self) -> int:
        import urllib.request

        with urllib.request.urlopen(f"http://{HOST}:{self.port}/stats", timeout=5) as response:
            return int(json.load(response)["requests"])

    def __exit__(self, *_: object) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def smoke(latency: float) -> None:
    """Both calls of a rollout's conversation through ``FakeServer``, printed with the request count."""
    import json
    import urllib.request

    def post(base: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        body = json.dumps({"model": "fake", "messages": messages}).encode()
        request = urllib.request.Request(
            f"{base}/chat/completions", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    with FakeServer(latency) as server:
        started = time.perf_counter()
        first = post(server.api_base, [{"role": "user", "content": "go"}])["choices"][0]["message"]
        call = first["tool_calls"][0]
        result = {"role": "tool", "tool_call_id": call["id"], "content": "maple"}
        second = post(server.api_base, [{"role": "user", "content": "go"}, first, result])
        wall = (time.perf_counter() - started) * 1000
        answer = second["choices"][0]["message"]["tool_calls"][0]["function"]
        print(f"{server.api_base}: {call['function']['name']} then {answer['name']} {answer['arguments']}")
        print(f"2 calls in {wall:.0f} ms (latency {latency * 1000:.0f} ms each)")
        print(f"requests served: {server.requests()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument(
        "--smoke", action="store_true", help="start as a subprocess, one conversation, print the stats, stop"
    )
    args = parser.parse_args()
    if args.smoke:
        smoke(args.latency)
        return
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, args.latency))


if __name__ == "__main__":
    main()
