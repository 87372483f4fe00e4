"""Commit-message trailers, read the way ``git interpret-trailers --parse`` reads them.

Only the message's final paragraph can be the trailer block, and never the subject paragraph.
That paragraph is the block when every line in it is a trailer (``Key: value``, the key letters,
digits and ``-``) or a continuation of one (a line starting with whitespace), or when at least a
quarter of its lines are trailers and one of them is git's own (``Signed-off-by:``, ``(cherry
picked from commit ...)``). ``Key: value`` lines anywhere else -- in a rationale an LLM wrote, say
-- are text, not trailers. Comment lines (``#``) are ignored, as ``git commit`` strips them.
"""

from __future__ import annotations

import re

TRAILER_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*)[ \t]*:[ \t]*(.*)$")
GIT_GENERATED = ("Signed-off-by: ", "(cherry picked from commit ")


def _final_paragraph(message: str) -> list[str] | None:
    lines = [line.rstrip() for line in message.splitlines() if not line.startswith("#")]
    while lines and not lines[-1].strip():
        lines.pop()
    start = len(lines)
    while start > 0 and lines[start - 1].strip():
        start -= 1
    if start == 0:  # one paragraph: the subject (and its body) is never a trailer block
        return None
    return lines[start:]


def parse_trailers(message: str) -> list[tuple[str, str]]:
    """The trailers of ``message`` in order, as ``(key, value)``; continuation lines are joined."""
    block = _final_paragraph(message)
    if not block:
        return []
    trailers: list[tuple[str, str]] = []
    recognised = 0
    git_own = False
    for line in block:
        if line[:1] in (" ", "\t") and trailers:
            key, value = trailers[-1]
            trailers[-1] = (key, f"{value} {line.strip()}".strip())
            recognised += 1
            continue
        git_own = git_own or line.startswith(GIT_GENERATED)
        match = TRAILER_LINE.match(line)
        if match:
            trailers.append((match.group(1), match.group(2).strip()))
            recognised += 1
    if recognised == len(block) or (git_own and 4 * len(trailers) >= len(block)):
        return trailers
    return []


def trailer_map(message: str) -> dict[str, str]:
    """The trailers as a dict; a key given twice keeps its last value."""
    return dict(parse_trailers(message))
