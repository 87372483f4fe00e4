"""Reference runs of two small tasks as proposers read them (``ReferenceAction`` tuples): counting
the lines of a.txt, and reading the colour in colour.txt."""

from __future__ import annotations

from harnessevolve.optimize.proposal import ReferenceAction

COUNT_LINES = (
    ReferenceAction("bash", {"command": "wc -l < a.txt"}, "3\n"),
    ReferenceAction("submit", {"answer": "3"}, "submitted"),
)
READ_COLOUR = (
    ReferenceAction("read_file", {"path": "colour.txt"}, "blue\n"),
    ReferenceAction("submit", {"answer": "blue"}, "submitted"),
)
