"""Scripted agent policies for tests: deterministic agents whose success depends on the harness.

``FamilyLearner`` solves a task (by replaying its gold calls) only when the system prompt holds a
demonstration of a task of the same family, and gives up at once otherwise. With more than
``max_examples`` demonstrations it gets confused and fails everything: enough to make one edit
accepted and the next one rejected.
"""

from __future__ import annotations

import re
from typing import Any

from harnessevolve.core.tasks import Benchmark


class FamilyLearner:
    def __init__(self, benchmark: Benchmark, max_examples: int = 1) -> None:
        self.by_instruction = {t.instruction: t for t in benchmark.tasks}
        self.max_examples = max_examples

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        system, instruction = messages[0]["content"], messages[1]["content"]
        task = self.by_instruction[instruction]
        demos = re.findall(r"^Task: (.*)$", system, re.MULTILINE)
        families = {self.by_instruction[d].tags[0] for d in demos if d in self.by_instruction}
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if task.tags[0] not in families or len(demos) > self.max_examples:
            return {"tool_calls": [{"name": "submit", "arguments": {"answer": "I do not know"}}]}
        gold = task.gold[min(turn, len(task.gold) - 1)]
        return {"tool_calls": [{"name": gold.tool, "arguments": gold.arguments}]}


class FragileLearner(FamilyLearner):
    """A ``FamilyLearner`` whose model call breaks once the system prompt holds a demonstration."""

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        if "## Example" in messages[0]["content"]:
            raise RuntimeError("context window exceeded")
        return super().__call__(messages, tools)


def ulimit_probe(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs ``ulimit -f; ulimit -t`` (the file-size and CPU limits its commands get), then submits."""
    if not any(m["role"] == "tool" for m in messages):
        return {"tool_calls": [{"name": "bash", "arguments": {"command": "ulimit -f; ulimit -t"}}]}
    return {"tool_calls": [{"name": "submit", "arguments": {"answer": "done"}}]}


class TogglePrompt:
    """A proposer that adds a line to the system prompt, then takes it out again: an edit and its
    exact undo (register it in ``registry.PROPOSERS`` under ``toggle``). After a rejection the line
    it adds says which try it is, so it never offers a harness a gate already refused (the run would
    not judge that again)."""

    name = "toggle"
    line = "\nKeep every answer short.\n"

    async def propose(self, context: Any) -> Any:
        import re

        from harnessevolve.optimize.proposal import Candidate

        text = context.files["prompts/system.md"]
        present = re.search(r"\nKeep every answer short[^\n]*\n", text)
        if present:
            new, summary = text.replace(present.group(0), ""), "remove the brevity line"
        else:
            tries = len(context.rejected)
            line = self.line if not tries else f"\nKeep every answer short (try {tries + 1}).\n"
            new, summary = text + line, "add a brevity line" + (f" (try {tries + 1})" if tries else "")
        return Candidate({"prompts/system.md": new}, summary, "test", (), (), self.name)

    async def revise(self, context: Any, candidate: Any, reason: str) -> Any:
        raise AssertionError("not revised")
