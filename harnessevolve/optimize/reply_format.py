"""How the LLM proposer asks for edit operations: a JSON-schema-constrained reply where the model's
provider supports it (litellm ``response_format``), JSON mode where it only has that, and the
instructions alone otherwise; plus the way back from the strict encoding to the edits schema."""

from __future__ import annotations

import contextlib
import json
from functools import cache
from typing import Any

from harnessevolve.core.schema import load_schema
from harnessevolve.models.registry import litellm_module
from harnessevolve.optimize.edits import EDIT_OPS

REPLY_NAME = "harness_edit_proposal"


def response_format(model: str) -> dict[str, Any] | None:
    """``response_format`` for ``model``: a strict JSON schema if litellm says the model supports
    one, plain JSON mode if it takes ``response_format`` at all, else None (instructions only)."""
    litellm = litellm_module()
    with contextlib.suppress(Exception):  # unknown models make litellm raise: treat as unsupported
        if litellm.supports_response_schema(model=model):
            return {
                "type": "json_schema",
                "json_schema": {"name": REPLY_NAME, "schema": strict_reply_schema(), "strict": True},
            }
    with contextlib.suppress(Exception):
        if "response_format" in (litellm.get_supported_openai_params(model=model) or []):
            return {"type": "json_object"}
    return None


@cache
def strict_reply_schema() -> dict[str, Any]:
    """The edits schema in the subset that strict structured output accepts (OpenAI ``strict``):
    every property required (optional ones nullable), no ``oneOf``/``if``, no free-form objects
    (``edit_tool.parameters`` travels as JSON text). :func:`normalize_reply` undoes that, then the
    full schema checks the reply."""
    schema = load_schema("edits")
    variants = []
    for op in EDIT_OPS:
        spec = schema["$defs"][op]
        props: dict[str, Any] = {}
        for name, prop in spec["properties"].items():
            prop = schema["$defs"][prop["$ref"].split("/")[-1]] if "$ref" in prop else prop
            if name == "op":
                props[name] = {"type": "string", "enum": [op]}
                continue
            if name == "parameters":
                prop = {"type": "string", "description": "The new JSON-schema arguments object as JSON text."}
            if name == "value":
                prop = {"type": ["integer", "number", "boolean", "string"]}
            out = {k: v for k, v in prop.items() if k in ("type", "enum", "description")}
            if name not in spec["required"]:
                if "enum" in out:
                    out["enum"] = [*out["enum"], None]
                else:
                    types = out["type"] if isinstance(out["type"], list) else [out["type"]]
                    out["type"] = [*types, "null"]
            props[name] = out
        variants.append(
            {"type": "object", "additionalProperties": False, "required": list(props), "properties": props}
        )
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["summary", "rationale", "targets", "edits"],
        "properties": {
            "summary": {"type": "string"},
            "rationale": {"type": "string"},
            "targets": {"type": "array", "items": {"type": "string"}},
            "edits": {"type": "array", "items": {"anyOf": variants}},
        },
    }


def normalize_reply(document: Any) -> Any:
    """Undo the strict-output encoding: drop ``null`` fields, parse ``parameters`` given as JSON text."""
    if not isinstance(document, dict) or not isinstance(document.get("edits"), list):
        return document
    edits = []
    for edit in document["edits"]:
        if isinstance(edit, dict):
            edit = {k: v for k, v in edit.items() if v is not None}
            if isinstance(edit.get("parameters"), str):
                with contextlib.suppress(json.JSONDecodeError):  # else the schema check reports it
                    edit["parameters"] = json.loads(edit["parameters"])
        edits.append(edit)
    return {**document, "edits": edits}
