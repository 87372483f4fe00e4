"""Reference runs of small tasks as proposers read them (``ReferenceAction`` tuples): counting the
lines of a.txt, and reading the colour in colour.txt; ``then_submit`` builds any run of one tool
call followed by the submit of its answer."""

from __future__ import annotations

from typing import Any

from harnessevolve.optimize.proposal import ReferenceAction


def then_submit(
    tool: str, arguments: dict[str, Any], observation: str, answer: str, submitted: str = "submitted"
) -> tuple[ReferenceAction, ReferenceAction]:
    """``tool(arguments)`` observing ``observation``, then ``submit(answer)`` observing ``submitted``."""
    submit = ReferenceAction("submit", {"answer": answer}, submitted)
    return ReferenceAction(tool, arguments, observation), submit


COUNT_LINES = then_submit("bash", {"command": "wc -l < a.txt"}, "3\n", "3")
READ_COLOUR = then_submit("read_file", {"path": "colour.txt"}, "blue\n", "blue")
