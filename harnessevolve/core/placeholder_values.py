"""Tool call values that look made up: a placeholder where a real value had to be found first.

Small agents fill a parameter they do not know with a stand-in rather than looking the value up or
asking: ``password='your_password'``, ``order_id='order_id'``, ``receiver_id="Michael's user_id"``,
``booking_id='12345'``, ``passport_number='P12345678'``. The tool then fails, or worse, acts on
nothing, and the run goes on as if it had worked. A value counts as a placeholder only when it
appears nowhere in what the agent was told (the user's messages, earlier tool results) and it

- is a fill-in marker: ``your_...``, ``<name>``, ``{name}``, ``[name]``, ``xxx``, the word
  ``placeholder``;
- holds the digit run ``12345`` (``12345``, ``P12345678``, ``booking_12345``);
- names a parameter instead of giving its value, with no digit in it: its words hold all the words
  of one of the tool's parameter names (``order_id='order_id'``), or a snake_case / camelCase name
  ending in an identifier word (``user_id`` in ``"Michael's user_id"``, ``accountNumber``).

Nothing here names a benchmark, a tool or a task: it reads the call, its parameter names and the
conversation. ``execute/placeholder_check.py`` answers such calls once instead of running them
(``loop.refuse_placeholders``); the optimizer's ``placeholder_value`` detector finds them in failed runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

MAX_CHARS = 80
"""Longer values are text the agent composed (a message, a command), not a looked-up value."""

_WORD = re.compile(r"[a-z0-9]+")
_MARKER = re.compile(
    r"^(?:your[_ -]\w.*|<[^<>]{1,40}>|\{\{?\s*[\w .-]{1,40}\s*\}?\}|\[[A-Za-z_ -]{1,40}\])$",
    re.IGNORECASE,
)
_MARKER_WORD = re.compile(r"(?:^|[^a-z])(?:placeholder|x{3,})(?:$|[^a-z])", re.IGNORECASE)
_DIGITS = re.compile(r"12345")
_PARAMETER_LIKE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b|\b[a-z]+(?:[A-Z][a-z]+)+\b")
ID_WORDS = frozenset(
    {"id", "ids", "name", "number", "code", "token", "key", "password", "username", "email", "secret"}
)
"""A name-like value ending in one of these words stands for a value to look up (``user_id``)."""


def _words(text: str) -> list[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)  # camelCase -> camel Case
    return _WORD.findall(spaced.lower())


def _names_a_parameter(value: str, names: list[str]) -> str | None:
    """The parameter-like name the value holds (all of that name's words, in order), or None."""
    if any(ch.isdigit() for ch in value):
        return None
    words = _words(value)
    found: list[str] = [n for n in _PARAMETER_LIKE.findall(value) if _words(n)[-1] in ID_WORDS]
    for name in [*names, *found]:
        wanted = _words(name)
        if len(wanted) < 2 and value.strip().lower() != name.lower():
            continue  # one plain word ("name", "city") is too common to mean a stand-in
        for start in range(len(words) - len(wanted) + 1):
            if words[start : start + len(wanted)] == wanted:
                return name
    return None


def why_placeholder(name: str, value: Any, seen: str, names: list[str] | None = None) -> str | None:
    """Why ``value`` (given for parameter ``name``) looks like a placeholder, in a few words; None
    when it does not, or when it appears in ``seen`` (what the agent was told, lowercased or not).
    ``names``: the call's other argument names (a value may name one of those)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip()
    if not text or len(text) > MAX_CHARS or text.lower() in seen.lower():
        return None
    if _MARKER.match(text) or _MARKER_WORD.search(text):
        return "a fill-in marker"
    if _DIGITS.search(text):
        return "a made-up number"
    named = _names_a_parameter(text, [name, *(names or [])])
    if named is not None:
        return f"the name {named!r}, not a value"
    return None


def leaf_values(arguments: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """``(parameter name, value)`` for every scalar in ``arguments`` (nested objects and arrays:
    the innermost key names the value)."""
    if isinstance(arguments, dict):
        for k, v in arguments.items():
            yield from leaf_values(v, str(k))
    elif isinstance(arguments, list):
        for v in arguments:
            yield from leaf_values(v, key)
    else:
        yield key, arguments


def placeholders(arguments: Any, seen: str) -> list[tuple[str, Any, str]]:
    """``(parameter, value, why)`` for each value of a call's ``arguments`` that looks made up."""
    names = list(arguments) if isinstance(arguments, dict) else []
    found = []
    for key, value in leaf_values(arguments):
        why = why_placeholder(key, value, seen, names)
        if why is not None:
            found.append((key, value, why))
    return found
