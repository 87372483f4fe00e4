"""Closed value lists a tool states in a parameter's description instead of its schema's ``enum``.

Many tool schemas written by hand (and converted from Python docstrings) leave ``enum`` out and say
it in words: ``[Enum]: ["engage", "release"]``, ``Options are: economy, business, first.``,
``Here are the options: read_write, read, write``, ``One of: a, b or c``, ``Type of the order
(Buy/Sell).`` A tool that receives a value outside such a list often accepts it without complaint
and does the wrong thing, so the model never learns its mistake. ``with_stated_options`` gives
``loop.repair_calls`` those lists as the ``enum`` they mean: a value is then matched to its one
option (``BUY`` -> ``Buy``, ``engaged`` -> ``engage``) or the call is answered with the options
before it runs. Only explicit lists count (a marker word or a parenthesised slash list of at least
two plain words); a schema's own ``enum`` always wins. Nothing here names a benchmark or a tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

MAX_OPTIONS = 64
"""A longer list is more likely prose than a closed set: not used."""

_MARKED = re.compile(
    r"(?:\[enum\]|\benum\b|\b(?:here are the |the )?(?:options|choices|possible values|allowed values|"
    r"valid values|accepted values)(?: are)?|\bone of(?: the following)?)\s*:?\s*",
    re.IGNORECASE,
)
_SLASHED = re.compile(r"\(\s*([A-Za-z][\w-]*(?:\s*/\s*[A-Za-z][\w-]*)+)\s*\)")
_ITEM = re.compile(r"^[\w][\w .:+#&'-]*$")


def stated_options(description: str) -> list[str] | None:
    """The closed list of string values ``description`` states, in its order; None without one."""
    text = description or ""
    marked = _MARKED.search(text)
    if marked is not None:
        found = _list_after(text[marked.end() :])
        if found:
            return found
    slashed = _SLASHED.findall(text)
    if len(slashed) == 1:
        return _checked([part.strip() for part in slashed[0].split("/")])
    return None


def _list_after(text: str) -> list[str] | None:
    text = text.lstrip()
    if text.startswith("["):  # a JSON list
        end = text.find("]")
        try:
            values = json.loads(text[: end + 1]) if end > 0 else None
        except ValueError:
            values = None
        if isinstance(values, list) and all(isinstance(v, str) for v in values):
            return _checked(values)
        text = text[1 : end if end > 0 else None]
    # a written list: up to the end of the sentence (a period then a space, or the text's end)
    sentence = re.split(r"\.(?:\s|$)|;|\n", text, maxsplit=1)[0]
    parts = re.split(r"\s*,\s*|\s+or\s+|\s*\|\s*", sentence.strip().rstrip(".,"))
    values = [p.strip().strip("'\"`") for p in parts if p.strip().strip("'\"`")]
    return _checked(values) if len(values) >= 2 else None


def _checked(values: list[str]) -> list[str] | None:
    values = [v for v in dict.fromkeys(values) if v]
    if not 2 <= len(values) <= MAX_OPTIONS:
        return None
    if not all(_ITEM.match(v) and len(v) <= 40 and len(v.split()) <= 3 for v in values):
        return None  # prose, not a list of values
    return values


def with_stated_options(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` (a tool's JSON-schema ``parameters``) with each string parameter (or array of
    strings) whose description states a closed list and that has no ``enum`` given that list as
    its ``enum`` (marked ``x-stated-options``); the schema itself is not changed."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return dict(schema)
    out: dict[str, Any] = {}
    for key, prop in properties.items():
        out[key] = _with_options(prop) if isinstance(prop, Mapping) else prop
    return {**schema, "properties": out}


def _with_options(prop: Mapping[str, Any]) -> Mapping[str, Any]:
    if "enum" in prop:
        return prop
    options = stated_options(str(prop.get("description") or ""))
    if options is None:
        return prop
    kind = prop.get("type")
    items = prop.get("items")
    if kind == "string":
        return {**prop, "enum": options, "x-stated-options": True}
    if kind == "array" and (not isinstance(items, Mapping) or items.get("type") in (None, "string")):
        if isinstance(items, Mapping) and "enum" in items:
            return prop
        return {
            **prop,
            "items": {**(items or {}), "type": "string", "enum": options},
            "x-stated-options": True,
        }
    return prop
