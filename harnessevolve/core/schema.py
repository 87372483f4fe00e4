"""JSON Schemas shipped in ``harnessevolve/schemas/`` and one way to check a document against them."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from functools import cache
from importlib import resources
from typing import Any

from harnessevolve.core.errors import HarnessEvolveError, SchemaError


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The schema ``harnessevolve/schemas/<name>.schema.json``."""
    text = resources.files("harnessevolve.schemas").joinpath(f"{name}.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def json_path(parts: Any) -> str:
    """``['loop', 'max_steps']`` -> ``loop.max_steps``; list indexes as ``[3]``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _has_non_finite(document: Any) -> bool:
    """Whether any float in ``document`` is NaN or infinite (fast: no paths kept)."""
    finite, stack = math.isfinite, [document]
    while stack:
        value = stack.pop()
        children = value.values() if type(value) is dict else value if type(value) is list else ()
        for child in children:
            kind = type(child)
            if kind is float:
                if not finite(child):
                    return True
            elif kind is dict or kind is list:
                stack.append(child)
    return isinstance(document, float) and not finite(document)


def non_finite(document: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], float]]:
    """Every NaN or infinity in ``document`` with its path: YAML's ``.nan``/``.inf`` and Python's
    JSON ``NaN``/``Infinity`` compare false against every bound, so schemas cannot refuse them."""
    if not _has_non_finite(document):
        return
    stack: list[tuple[tuple[Any, ...], Any]] = [(path, document)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                yield where, value
        elif isinstance(value, dict):
            stack.extend((where + (k,), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((where + (i,), v) for i, v in reversed(list(enumerate(value))))


def _non_finite_message(value: float) -> str:
    return f"{value} is not a finite number (NaN and infinities are refused)"


FAST_SCHEMAS = frozenset({"trajectory"})
"""Schemas also compiled to Python code (fastjsonschema): a valid 100 MB trajectory checks in
about half a second instead of many. They use only keywords both validators read alike; the
located message of an invalid document always comes from jsonschema."""


@cache
def _fast_validator(name: str) -> Any:
    import fastjsonschema

    schema = {k: v for k, v in load_schema(name).items() if k != "$schema"}
    return fastjsonschema.compile(schema)


def _fast_valid(document: Any, schema_name: str) -> bool:
    if schema_name not in FAST_SCHEMAS:
        return False
    import fastjsonschema

    try:
        _fast_validator(schema_name)(document)
    except (fastjsonschema.JsonSchemaException, RecursionError):
        return False
    return True


def check(
    document: Any, schema_name: str, *, file: str, error: type[HarnessEvolveError] = SchemaError
) -> None:
    """Raise ``error`` naming ``file`` and the JSON path of the first (deepest) violation.

    A NaN or infinity anywhere in the document is refused first, whatever the schema says."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    for where, value in non_finite(document):
        raise error(_non_finite_message(value), file=file, field=json_path(list(where)))
    if _fast_valid(document, schema_name):
        return

    validator = Draft202012Validator(load_schema(schema_name))
    found = best_match(validator.iter_errors(document))
    if found is None:
        return
    path, message = explain(found)
    raise error(clip_message(message), file=file, field=path)


def clip_message(message: str, limit: int = 200) -> str:
    """A violation's message kept to one readable line: jsonschema quotes the offending value whole
    (a 100 MB ``steps`` list, a 900-deep ``extra``)."""
    message = " ".join(message.split())
    if len(message) <= limit:
        return message
    half = limit // 2 - 2
    return f"{message[:half]} … {message[-half:]}"


def explain(found: Any) -> tuple[str, str]:
    """(json path, message) of one violation, naming the bad key: a ``oneOf``/``anyOf`` failure is
    narrowed to the branch its discriminator (a ``const`` property such as ``type``) selects, an
    unknown key or a missing one is named in the path."""
    from jsonschema.exceptions import best_match

    found = _narrow(found)
    path = list(found.absolute_path)
    message = found.message
    if found.validator == "additionalProperties" and found.validator_value is False:
        extra = sorted(set(found.instance) - set(found.schema.get("properties", {})))
        if len(extra) == 1:
            return json_path(path + extra), f"unknown key {extra[0]!r}"
        message = f"unknown key ({found.message})"
    elif found.validator == "required":
        missing = [k for k in found.validator_value if k not in found.instance]
        if len(missing) == 1:
            return json_path(path + missing), f"required key {missing[0]!r} is missing"
    elif found.validator in ("oneOf", "anyOf") and found.context:
        message = f"matches none of the allowed forms ({best_match(found.context).message})"
    return json_path(path), message


def _narrow(found: Any) -> Any:
    from jsonschema.exceptions import best_match

    while found.validator in ("oneOf", "anyOf") and found.context:
        branches: dict[int, list[Any]] = {}
        for sub in found.context:
            branches.setdefault(sub.schema_path[0], []).append(sub)
        consts: dict[str, Any] = {}  # discriminator key -> the values the branches allow
        for branch in found.validator_value:
            for key, spec in branch.get("properties", {}).items():
                if isinstance(spec, dict) and "const" in spec:
                    consts.setdefault(key, []).append(spec["const"])
        selected = [
            i
            for i in range(len(found.validator_value))
            if not any(
                list(sub.schema_path)[1:2] == ["properties"] and sub.validator == "const"
                for sub in branches.get(i, [])
            )
        ]
        if consts and isinstance(found.instance, dict):
            key, allowed = next(iter(consts.items()))
            choices = ", ".join(map(str, allowed))
            if key not in found.instance:
                return _Located(
                    found.absolute_path, key, f"required key {key!r} is missing (one of: {choices})"
                )
            if not selected:
                value = found.instance[key]
                return _Located(found.absolute_path, key, f"{key} {value!r} is not one of: {choices}")
        if len(selected) != 1 or not branches.get(selected[0]):
            return found
        found = best_match(branches[selected[0]])
    return found


class _Located:
    """A synthetic violation: ``explain`` reads these attributes only."""

    validator = "located"
    validator_value = None
    context = None

    def __init__(self, path: Any, key: str, message: str) -> None:
        self.absolute_path = [*path, key]
        self.message = message


def all_errors(document: Any, schema_name: str) -> list[tuple[str, str]]:
    """Every violation as ``(json path, message)``, for ``validate`` to list them all."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(load_schema(schema_name))
    bad = [(json_path(list(where)), _non_finite_message(value)) for where, value in non_finite(document)]
    seen = {where for where, _ in bad}  # a NaN also fails its bounds: say it once
    found = (
        explain(e)
        for e in sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path])
    )
    return bad + [(where, clip_message(message)) for where, message in found if where not in seen]
