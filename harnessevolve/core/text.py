"""Small text helpers shared by the stages that compare texts loosely."""

from __future__ import annotations


def folded(text: object) -> str:
    """``text`` in lower case with one space between words (no leading or trailing space): the form
    in which two texts that differ only by case and spacing compare equal."""
    return " ".join(str(text).split()).lower()


MESSAGE_QUOTE_LIMIT = 80
"""Characters of expected / found text quoted in a check's message before it is cut."""


def quote(text: str, limit: int = MESSAGE_QUOTE_LIMIT) -> str:
    """``text`` as a Python literal, cut to ``limit`` characters (``...`` marks a cut)."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."
