"""Tool call values that look made up: a placeholder where a real value had to be found first.

Small agents fill a parameter they do not know with a stand-in rather than looking the value up or
asking: ``password='your_password'``, ``client_id='<client_id>'``, ``order_id='order_id'``,
``receiver_id="Michael's user_id"``, ``booking_id='12345'``. The tool then fails, or worse, acts on
nothing, and the run goes on as if it had worked. A value counts as a placeholder only when it
appears nowhere in what the agent was told (its system message, the user's messages, the tools'
schemas, earlier tool results) and it is one of a few narrow shapes:

- a fill-in marker: ``your_...`` with no space in it, a name of two or more words joined by ``_``
  or spaces in angle brackets, braces or square brackets (``<access_token>``, ``{file_name}``,
  ``[USER_ID]``; not ``<div>`` or ``[ERROR]``), or ``xxx``;
- the digit run ``12345`` not inside a longer count (``12345``, ``P12345678``, ``booking_12345``;
  not ``0123456789``);
- a parameter's name instead of its value, as one bare token or a short possessive phrase: one
  of the call's argument names (``order_id='order_id'``), or, for a parameter whose own name ends
  in an identifier word (``..._id``, ``...name``, ``...number``...), a snake_case or camelCase name
  ending in the same word (``user_id`` in ``"Michael's user_id"`` for ``receiver_id``).

The rule is narrow on purpose: a made-up value of another shape (``john_doe``,
``user@example.com``) passes, and free text, paths, queries and code never match. Nothing here
names a benchmark, a tool or a task. ``execute/placeholder_check.py`` answers such calls once
instead of running them (``loop.refuse_placeholders``); the optimizer's ``placeholder_value``
detector finds them in failed runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

MAX_CHARS = 80
"""Longer values are text the agent composed (a message, a command), not a looked-up value."""

_WORD = re.compile(r"[a-z0-9]+")
_NAME_INSIDE = r"(?:[A-Za-z][A-Za-z0-9]*(?:[_ ][A-Za-z0-9]+)+)"
_MARKER = re.compile(
    rf"^(?:[Yy]our_[A-Za-z0-9_]+|<\s*{_NAME_INSIDE}\s*>|\{{\{{?\s*{_NAME_INSIDE}\s*\}}?\}}|\[\s*{_NAME_INSIDE}\s*\])$"
)
_XXX = re.compile(r"(?:^|[^a-z])x{3,}(?:$|[^a-z])", re.IGNORECASE)
_DIGITS = re.compile(r"(?<![0-9])12345")
_PARAMETER_LIKE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b|\b[a-z]+(?:[A-Z][a-z]+)+\b")
_SHORT_PHRASE = re.compile(r"^[A-Za-z_][\w']*(?: [\w']+){0,3}$")
"""At most four words of letters, digits, ``_`` and ``'``: no path, list, query or sentence."""
ID_WORDS = frozenset(
    {"id", "ids", "name", "number", "code", "token", "key", "password", "username", "email", "secret"}
)
"""A parameter whose name ends in one of these words takes a value to look up (``user_id``)."""


def _words(text: str) -> list[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)  # camelCase -> camel Case
    return _WORD.findall(spaced.lower())


def _names_a_parameter(value: str, name: str, names: list[str]) -> str | None:
    """The parameter name ``value`` gives instead of a value, or None: one of the call's argument
    names as the whole value, or, for an identifier-like parameter, a name-like token ending in
    the parameter's identifier word inside a short phrase."""
    if any(ch.isdigit() for ch in value) or not _SHORT_PHRASE.match(value):
        return None
    bare = _words(value)
    for other in {name, *names}:
        if other and bare == _words(other):
            return other
    last = _words(name)[-1:] if name else []
    if not last or last[0] not in ID_WORDS:
        return None
    for token in _PARAMETER_LIKE.findall(value):
        if _words(token)[-1] == last[0]:
            return str(token)
    return None


def why_placeholder(name: str, value: Any, names: list[str] | None = None) -> str | None:
    """Why ``value`` (given for parameter ``name``) looks like a placeholder, in a few words, by its
    shape alone; None when it does not. ``names``: the call's argument names."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip()
    if not text or len(text) > MAX_CHARS:
        return None
    if _MARKER.match(text) or _XXX.search(text):
        return "a fill-in marker"
    if _DIGITS.search(text):
        return "a made-up number"
    named = _names_a_parameter(text, name, names or [])
    return None if named is None else f"the name {named!r}, not a value"


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


def suspects(arguments: Any) -> list[tuple[str, Any, str]]:
    """``(parameter, value, why)`` for each value of a call's ``arguments`` shaped like a
    placeholder, whatever the agent was told (cheap: most calls have none)."""
    names = [str(k) for k in arguments] if isinstance(arguments, dict) else []
    found = []
    for key, value in leaf_values(arguments):
        why = why_placeholder(key, value, names)
        if why is not None:
            found.append((key, value, why))
    return found


def untold(found: list[tuple[str, Any, str]], told: str) -> list[tuple[str, Any, str]]:
    """The ``suspects`` whose value appears nowhere in ``told`` (what the agent was told, any case)."""
    seen = told.lower()
    return [(key, value, why) for key, value, why in found if str(value).strip().lower() not in seen]
