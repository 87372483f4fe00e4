"""The rollout_throughput workload through DSPy: ``dspy.Evaluate(num_threads=c)`` over a ``dspy.Module``.

The module does by hand what harnessevolve's agent loop does: the same two LM calls (with the
harness's tools, against the same fake server) and the same tool command, run the blocking way in
the same sandbox, in a fresh workspace per example, removed (its uid and cgroup given back) as the
example ends, as harnessevolve's scorer removes a rollout's.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from harnessevolve.execute.workspace import remove_workspace, tool_env
from harnessevolve.harness.model import Harness


def run_command_sync(command: str, workspace: Path, sandbox: Any) -> str:
    """One tool command the blocking way (DSPy's threads), in the same sandbox harnessevolve uses."""
    with sandbox.launch(command, workspace, tool_env(workspace)) as launch:
        done = subprocess.run(
            launch.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=20,
            start_new_session=True,
            **launch.subprocess_options(),
        )
    return done.stdout.decode(errors="replace")


def dspy_evaluate(
    harness: Harness, model: str, word: str, api_base: str, n: int, threads: int, sandbox: Any
) -> dict[str, Any]:
    """Runs ``n`` examples on ``threads`` threads; wall seconds, score (%) and CPU seconds used."""
    import dspy

    lm = dspy.LM(model, api_base=api_base, api_key="dummy", cache=False, num_retries=0, temperature=0.0)
    tools = [t.openai_schema() for t in harness.tools]
    system = harness.assembled_prompt()

    class ShellAgent(dspy.Module):
        """The same loop by hand: LM call -> bash in a fresh workspace -> LM call -> submit."""

        def forward(self, question: str) -> Any:
            workspace = tempfile.mkdtemp(prefix="dspy-")
            Path(workspace, "a.txt").write_text(f"{word}\n")
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": system},
                {"role": "user", "content": question},
            ]
            try:
                for _ in range(harness.loop.max_steps):
                    call = lm(messages=messages, tools=tools)[0]["tool_calls"][0]
                    name, arguments = call.function.name, call.function.arguments
                    if name == "submit":
                        return dspy.Prediction(answer=json.loads(arguments)["answer"])
                    command = json.loads(arguments)["command"]
                    output = run_command_sync(command, Path(workspace), sandbox)
                    messages.append(
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": call.id,
                                    "type": "function",
                                    "function": {"name": name, "arguments": arguments},
                                }
                            ],
                        }
                    )
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
                return dspy.Prediction(answer="")
            finally:  # as harnessevolve's scorer does: its uid and cgroup are given back at once
                remove_workspace(Path(workspace))

    devset = [
        dspy.Example(question="What word is in a.txt? Submit it.").with_inputs("question") for _ in range(n)
    ]
    evaluate = dspy.Evaluate(
        devset=devset,
        metric=lambda example, prediction, trace=None: prediction.answer == word,
        num_threads=threads,
        display_progress=False,
        display_table=False,
        max_errors=n,
    )
    before = os.times()
    started = time.perf_counter()
    result = evaluate(ShellAgent())
    wall = time.perf_counter() - started
    after = os.times()
    cpu_s = sum(after[i] - before[i] for i in range(4))  # user, system, children's user and system
    return {"n": n, "wall": wall, "score": float(result.score), "cpu_s": cpu_s}
