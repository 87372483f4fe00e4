"""When two actions are the same action, and if not, how they differ.

Two calls of one tool are the same when their arguments are equal as JSON values normalised through
the tool's schema (``tool_schemas.normalise_value``: numbers by value, strings trimmed, key order
ignored), or, for strings, similar as text (normalised similarity >= ``ARGUMENT_SIMILARITY``) *and*
naming the same operands (the words that decide the effect: file names, numbers, words to write),
so ``wc -l  ./a.txt`` matches ``wc -l a.txt`` but ``wc -l b.txt`` does not. An argument left out
equals the schema's ``default`` when it has one. A value whose JSON type the schema does not allow
(``"5"`` for a number) never matches. Without a schema for a parameter, scalars compare as text
(``5`` matches ``"5"``). A submitted answer must match exactly after normalisation, ignoring case.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from harnessevolve.evaluate.actions import Action
from harnessevolve.evaluate.tool_schemas import ToolSchema, default_of, normalise_value, type_mismatch

ARGUMENT_SIMILARITY = 0.8


def _norm(value: Any) -> str:
    return re.sub(r"\s+", " ", str(value)).strip()


def argument_similarity(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Mean text similarity over the union of keys (a key on one side only counts 0)."""
    keys = set(a) | set(b)
    if not keys:
        return 1.0
    total = 0.0
    for key in keys:
        if key in a and key in b:
            total += difflib.SequenceMatcher(None, _norm(a[key]), _norm(b[key])).ratio()
    return total / len(keys)


_OPERAND = re.compile(r"""[^\s'"`;&|<>(){}]+""")


def operands(value: Any) -> frozenset[str]:
    """The words of an argument that decide its effect, ignoring quoting, shell punctuation, a
    leading ``./`` and a trailing ``/``: ``mv a.txt old/`` and ``mv ./a.txt 'old'`` have the same."""
    words = (w.removeprefix("./") for w in _OPERAND.findall(str(value)))
    return frozenset(w.rstrip("/") or w for w in words)


@dataclass(frozen=True)
class Difference:
    """How a run's call differs from the reference's: ``tool``, ``missing`` (an argument the
    reference gives is absent), ``type`` (a value of the wrong JSON type) or ``value``."""

    kind: str
    key: str | None = None
    detail: str = ""


def _same_text(a: str, b: str) -> bool:
    if a == b:
        return True
    similar = difflib.SequenceMatcher(None, a, b).ratio() >= ARGUMENT_SIMILARITY
    return similar and operands(a) == operands(b)


def same_value(a: Any, b: Any, schema: Any = None) -> bool:
    na, nb = normalise_value(a, schema), normalise_value(b, schema)
    if na == nb:
        return True
    if isinstance(na, str) and isinstance(nb, str):
        return _same_text(na, nb)
    if isinstance(na, dict) and isinstance(nb, dict):
        props = schema.get("properties", {}) if isinstance(schema, dict) else {}
        return set(na) == set(nb) and all(same_value(a[k], b[k], props.get(k)) for k in a)
    if isinstance(na, list) and isinstance(nb, list):
        items = schema.get("items") if isinstance(schema, dict) else None
        return len(na) == len(nb) and all(same_value(x, y, items) for x, y in zip(a, b, strict=True))
    if schema is None and not isinstance(na, dict | list) and not isinstance(nb, dict | list):
        return _norm(na) == _norm(nb)
    return False


def argument_difference(
    run: dict[str, Any], ref: dict[str, Any], schema: ToolSchema | None
) -> Difference | None:
    props = schema.properties if schema else {}
    for key, value in run.items():
        problem = type_mismatch(value, props.get(key))
        if problem is not None and not (key in ref and type_mismatch(ref[key], props.get(key))):
            return Difference("type", key, f"{key} is a {problem}")
    for key in ref:
        if key not in run:
            has_default, default = default_of(schema, key)
            if has_default and same_value(default, ref[key], props.get(key)):
                continue
            optional = schema is not None and key in props and key not in schema.required
            return Difference("value" if optional else "missing", key, f"{key} is missing")
    for key in run:
        if key not in ref:
            has_default, default = default_of(schema, key)
            if not (has_default and same_value(run[key], default, props.get(key))):
                return Difference("value", key, f"{key} is not in the reference's call")
        elif not same_value(run[key], ref[key], props.get(key)):
            return Difference("value", key, f"{key} differs")
    return None


def _answer(action: Action) -> str | None:
    value = action.arguments.get("answer")
    return None if value is None else _norm(value).lower()


def difference(run: Action, ref: Action, schema: ToolSchema | None = None) -> Difference | None:
    """None when ``run`` is the same action as ``ref``."""
    if run.is_finish and ref.is_finish:
        a, b = _answer(run), _answer(ref)
        return None if a is None or b is None or a == b else Difference("value", "answer", "answer differs")
    if run.tool != ref.tool or run.is_finish != ref.is_finish:
        return Difference("tool")
    if run.raw_arguments is not None or ref.raw_arguments is not None:
        same = _norm(run.raw_arguments or run.arguments) == _norm(ref.raw_arguments or ref.arguments)
        return None if same else Difference("value", None, "arguments are not JSON")
    return argument_difference(run.arguments, ref.arguments, schema)


def same_action(run: Action, ref: Action, schema: ToolSchema | None = None) -> bool:
    return difference(run, ref, schema) is None
