"""The tools an agent was offered, and call arguments compared as JSON values through their schemas.

Definitions come from the trajectory itself (ATIF v1.5 ``agent.tool_definitions``, or
``agent.extra.tool_definitions``) and from the caller (the harness's or the task's tools), in
OpenAI style (``{"type": "function", "function": {"name", "parameters"}}``), MCP style
(``{"name", "inputSchema"}``) or bare (``{"name", "parameters"}``). BFCL's parameter types
(``dict``, ``float``, ``tuple``) are read as their JSON Schema equivalents.

Normalisation (``normalise``) turns arguments into plain comparable values: numbers by value
(``5`` == ``5.0``), strings trimmed with their inner whitespace collapsed, objects by key (order
never matters), arrays element by element. When the schema gives a parameter's type, a value of
another JSON type (``"5"`` for a number) is a *type mismatch*: it never matches, and is reported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

_TYPE_ALIASES = {
    "dict": "object",
    "float": "number",
    "double": "number",
    "int": "integer",
    "long": "integer",
    "str": "string",
    "bool": "boolean",
    "list": "array",
    "tuple": "array",
    "any": "",
}


@dataclass(frozen=True)
class ToolSchema:
    name: str
    parameters: dict[str, Any] = field(default_factory=dict)
    read_only: bool | None = None
    """From MCP's ``annotations.readOnlyHint`` when given; None: not stated."""

    @property
    def properties(self) -> dict[str, Any]:
        props = self.parameters.get("properties")
        return props if isinstance(props, dict) else {}

    @property
    def required(self) -> tuple[str, ...]:
        req = self.parameters.get("required")
        return tuple(r for r in req if isinstance(r, str)) if isinstance(req, list) else ()


@dataclass(frozen=True)
class ToolSet:
    """The offered tools by name; ``known`` is False when no definitions were found at all."""

    tools: Mapping[str, ToolSchema] = field(default_factory=dict)

    @property
    def known(self) -> bool:
        return bool(self.tools)

    def get(self, name: str | None) -> ToolSchema | None:
        return self.tools.get(name) if name is not None else None

    def offers(self, name: str) -> bool | None:
        """True/False when definitions are known; None when there are none to check against."""
        return name in self.tools if self.tools else None


def parse_definition(doc: Any) -> ToolSchema | None:
    """One tool definition in any of the accepted shapes; None when it names no tool."""
    if not isinstance(doc, dict):
        return None
    function = doc.get("function")
    body: dict[str, Any] = function if isinstance(function, dict) else doc
    name = body.get("name")
    if not isinstance(name, str) or not name:
        return None
    params = body.get("parameters", body.get("inputSchema", body.get("input_schema", {})))
    annotations = body.get("annotations")
    hint = annotations.get("readOnlyHint") if isinstance(annotations, dict) else None
    return ToolSchema(
        name, params if isinstance(params, dict) else {}, hint if isinstance(hint, bool) else None
    )


def tool_set(*sources: Iterable[Any] | None) -> ToolSet:
    """Every definition of every source, the first definition of a name winning."""
    tools: dict[str, ToolSchema] = {}
    for source in sources:
        for doc in source or ():
            schema = parse_definition(doc)
            if schema is not None and schema.name not in tools:
                tools[schema.name] = schema
    return ToolSet(tools)


def trajectory_definitions(trajectory: Any) -> list[Any]:
    """The definitions a trajectory carries: v1.5 ``agent.tool_definitions``, then
    ``agent.extra.tool_definitions``."""
    extra = (
        trajectory.agent_extra.get("tool_definitions") if isinstance(trajectory.agent_extra, dict) else None
    )
    return [*trajectory.tool_definitions, *(extra if isinstance(extra, list) else [])]


def _type_of(schema: Any) -> set[str]:
    """The JSON types a parameter schema allows (empty: any)."""
    if not isinstance(schema, dict):
        return set()
    declared = schema.get("type")
    names = declared if isinstance(declared, list) else [declared] if isinstance(declared, str) else []
    types = {_TYPE_ALIASES.get(n, n) for n in names if isinstance(n, str)} - {""}
    if "enum" in schema and not types:
        types = {_json_type(v) for v in schema["enum"] if v is not None}
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key, []) if isinstance(schema.get(key), list) else []:
            inner = _type_of(option)
            if not inner:
                return set()
            types |= inner
    return types


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"


def type_mismatch(value: Any, schema: Any) -> str | None:
    """``'string where the schema says number'`` when the value's JSON type is not allowed."""
    allowed = _type_of(schema)
    if not allowed:
        return None
    actual = _json_type(value)
    if actual in allowed or (actual == "integer" and "number" in allowed):
        return None
    if actual == "number" and "integer" in allowed and float(value).is_integer():
        return None
    return f"{actual} where the schema says {'/'.join(sorted(allowed))}"


_SPACE = re.compile(r"\s+")


def normalise_value(value: Any, schema: Any = None) -> Any:
    """A comparable form of one JSON value (see the module docstring)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        number = float(value)
        return int(number) if number.is_integer() else number
    if isinstance(value, str):
        return _SPACE.sub(" ", value).strip()
    if isinstance(value, list | tuple):
        items = schema.get("items") if isinstance(schema, dict) else None
        return [normalise_value(v, items) for v in value]
    if isinstance(value, dict):
        props = schema.get("properties", {}) if isinstance(schema, dict) else {}
        props = props if isinstance(props, dict) else {}
        return {
            str(k): normalise_value(v, props.get(k))
            for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
        }
    return str(value)


def canonical_call(tool: str | None, arguments: dict[str, Any], schema: ToolSchema | None) -> str:
    """One string per call up to benign differences (repetition detection uses it)."""
    props = schema.properties if schema else {}
    normal = {k: normalise_value(v, props.get(k)) for k, v in arguments.items()}
    return json.dumps([tool, normal], sort_keys=True, default=str)


def default_of(schema: ToolSchema | None, key: str) -> tuple[bool, Any]:
    prop = schema.properties.get(key) if schema else None
    if isinstance(prop, dict) and "default" in prop:
        return True, prop["default"]
    return False, None


def offered_tools(*trajectories: Any, tools: Iterable[Any] | None = None) -> ToolSet:
    """The tool definitions the caller passes, then those the trajectories carry."""
    return tool_set(tools, *(trajectory_definitions(t) for t in trajectories))
