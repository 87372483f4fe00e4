"""Small text helpers shared by the stages that compare texts loosely."""

from __future__ import annotations


def folded(text: object) -> str:
    """``text`` in lower case with one space between words (no leading or trailing space): the form
    in which two texts that differ only by case and spacing compare equal."""
    return " ".join(str(text).split()).lower()
