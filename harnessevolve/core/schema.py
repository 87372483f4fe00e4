"""JSON Schemas shipped in ``harnessevolve/schemas/`` and one way to check a document against them."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from harnessevolve.core.errors import HarnessEvolveError, SchemaError


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The schema ``harnessevolve/schemas/<name>.schema.json``."""
    text = resources.files("harnessevolve.schemas").joinpath(f"{name}.schema.json").read_text()
    return json.loads(text)


def json_path(parts: Any) -> str:
    """``['loop', 'max_steps']`` -> ``loop.max_steps``; list indexes as ``[3]``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def check(
    document: Any, schema_name: str, *, file: str, error: type[HarnessEvolveError] = SchemaError
) -> None:
    """Raise ``error`` naming ``file`` and the JSON path of the first (deepest) violation."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    validator = Draft202012Validator(load_schema(schema_name))
    found = best_match(validator.iter_errors(document))
    if found is None:
        return
    path = list(found.absolute_path)
    message = found.message
    if found.validator == "additionalProperties" and found.validator_value is False:
        message = f"unknown key ({found.message})"
    raise error(message, file=file, field=json_path(path))


def all_errors(document: Any, schema_name: str) -> list[tuple[str, str]]:
    """Every violation as ``(json path, message)``, for ``validate`` to list them all."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(load_schema(schema_name))
    return [
        (json_path(list(e.absolute_path)), e.message)
        for e in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    ]
