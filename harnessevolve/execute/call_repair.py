"""``loop.repair_calls``: a tool call checked against the tool's JSON schema before it runs, and the
mistakes small models make repaired where the schema leaves one reading, or answered with what the
schema needs where it does not.

Repaired (the call runs as repaired; each repair is a note in the rollout's ``extra.call_repairs``):

- a tool name not in the schema that matches exactly one tool up to case and separators
  (``Bash``, ``math_add`` for ``math.add``), or is the one close spelling (``difflib``, cutoff 0.85);
- arguments that are no JSON object, for a tool with exactly one required string parameter: the
  raw text becomes that parameter;
- an argument name that matches exactly one parameter up to case and separators (``FilePath`` ->
  ``file_path``); an unknown name when exactly one required parameter is missing;
- a value of the wrong JSON type where one conversion fits the schema: a numeric string for an
  integer or number, ``"true"``/``"false"`` for a boolean, a number or boolean for a string, a
  JSON text for an array or object, a single value for an array of that value's type; an enum
  value (an array's items too) that stands for one option: up to case and separators, the one
  option whose words it holds or that holds its words, or the one close spelling -- the enum is the
  schema's, or a closed list the parameter's description states (``core/stated_options.py``:
  ``[Enum]: [...]``, ``Options are: a, b, c``, ``(Buy/Sell)``); a string wholly wrapped in one
  markdown code fence (```python ... ```): its inside (a file's content written as in chat);
- with the embedded model, a call written with raw quotes inside a string value (code with its
  docstrings), which JSON cannot read: read by its shape (``models/raw_call.py``).

Answered instead of run: a call still missing a required parameter gets an error naming what is
missing and the tool's parameters (the model fixes it on its next turn, no tool runs with half its
arguments); so does one with a value no conversion fits (wrong type, outside its enum, an array
item outside its items' enum) or an argument the schema does not list (``misfits``). With the
embedded model such a call reaches the repair as a call, not as a parse error
(``keep_mistyped_calls``). Nothing here names a benchmark or a task: it reads the schemas the harness offers.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harnessevolve.core.stated_options import with_stated_options
from harnessevolve.models.raw_call import unfenced

CLOSE_NAME = 0.85


@dataclass
class Repair:
    name: str
    arguments: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    """Set when the call must not run: what the schema needs that the call lacks."""


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def match_name(name: str, known: list[str]) -> str | None:
    """The one known name ``name`` stands for (case and separators aside, or one close spelling)."""
    if name in known:
        return name
    same = [k for k in known if _key(k) == _key(name)]
    if len(same) == 1:
        return same[0]
    close = difflib.get_close_matches(name, known, n=2, cutoff=CLOSE_NAME)
    return close[0] if len(close) == 1 else None


def repair_call(
    name: str, arguments: dict[str, Any] | None, raw: str, schemas: Mapping[str, dict[str, Any]]
) -> Repair:
    """``name(arguments)`` checked against ``schemas`` (tool name -> JSON-schema ``parameters``)."""
    repair = Repair(name, arguments)
    found = match_name(name, list(schemas))
    if found is None:
        return repair  # the loop answers an unknown tool as it always has
    if found != name:
        repair.notes.append(f"tool {name!r} -> {found!r}")
        repair.name = found
    schema = with_stated_options(schemas[found] or {})
    properties: dict[str, Any] = schema.get("properties") or {}
    required = [r for r in schema.get("required") or [] if r in properties]
    if arguments is None:
        strings = [r for r in required if (properties[r] or {}).get("type") == "string"]
        if len(required) == 1 and strings and raw.strip():
            repair.arguments = {strings[0]: raw.strip()}
            repair.notes.append(f"raw text -> {strings[0]!r}")
        return repair
    fixed: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in arguments.items():
        target = key if key in properties else match_name(key, list(properties)) if properties else None
        if target is None or target in arguments and target != key:
            fixed[key] = value
            if properties and key not in properties:
                unknown.append(key)
            continue
        if target != key:
            repair.notes.append(f"argument {key!r} -> {target!r}")
        fixed[target] = value
    missing = [r for r in required if r not in fixed]
    if len(missing) == 1 and len(unknown) == 1:
        repair.notes.append(f"argument {unknown[0]!r} -> {missing[0]!r} (the one required argument missing)")
        fixed[missing[0]] = fixed.pop(unknown[0])
        missing = []
    for key, value in list(fixed.items()):
        if key in properties:
            converted, note = coerce(value, properties[key] or {})
            if note:
                repair.notes.append(f"{key}: {note}")
                fixed[key] = converted
    repair.arguments = fixed
    if missing:
        repair.error = (
            f"error: {found} was not run: it needs {', '.join(repr(m) for m in missing)}. "
            f"Its parameters: {describe(properties, required)}. Call it again with every required argument."
        )
    elif problems := misfits(fixed, schema):
        repair.error = (
            f"error: {found} was not run: {'; '.join(problems)}. "
            f"Its parameters: {describe(properties, required)}. Call it again with values that fit."
        )
    return repair


def misfits(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """What no repair could fix: a value of the wrong type or outside its enum (an array's items
    too), an argument the schema does not list (unless ``additionalProperties: true``; a schema
    without ``properties`` says nothing, so nothing is refused)."""
    if not isinstance(schema.get("properties"), Mapping):
        return []
    properties: Mapping[str, Any] = schema["properties"]
    problems = []
    for key, value in arguments.items():
        prop = properties.get(key)
        if not isinstance(prop, Mapping):
            if schema.get("additionalProperties") is not True:
                problems.append(f"it has no argument {key!r}")
            continue
        kinds = prop.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds] if isinstance(kinds, str) else []
        if kinds and not any(_fits(value, k) for k in kinds):
            problems.append(f"{key} must be {' or '.join(kinds)}, not {value!r}")
            continue
        enum, items = prop.get("enum"), prop.get("items")
        if isinstance(enum, list) and value not in enum:
            problems.append(f"{key} must be one of {enum}, not {value!r}")
        elif isinstance(items, Mapping) and isinstance(items.get("enum"), list) and isinstance(value, list):
            wrong = [v for v in value if v not in items["enum"]]
            if wrong:
                problems.append(f"each of {key} must be one of {items['enum']}, not {wrong!r}")
    return problems


def coerce(value: Any, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """``value`` converted to the schema's type where one conversion fits; ``(value, None)`` else."""
    kind = schema.get("type")
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum and isinstance(value, str):
        option = match_option(value, enum)
        if option is not None:
            return option, f"{value!r} -> {option!r} ({_options_word(schema)})"
    items = schema.get("items")
    if kind == "array" and isinstance(value, list) and isinstance(items, Mapping):
        item_enum = items.get("enum")
        if isinstance(item_enum, list) and any(v not in item_enum for v in value):
            mapped = [
                match_option(v, item_enum) if isinstance(v, str) and v not in item_enum else v for v in value
            ]
            if all(m is not None for m in mapped):
                return mapped, f"{value!r} -> {mapped!r} ({_options_word(schema)})"
    if kind == "string" and isinstance(value, str) and (inner := unfenced(value)) is not None:
        return inner, "code fence around the value removed"
    if not isinstance(kind, str) or _fits(value, kind):
        return value, None
    if kind in ("integer", "number") and isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return value, None
        if kind == "integer" and number.is_integer():
            return int(number), f"{value!r} -> integer"
        if kind == "number":
            return (
                int(number) if number.is_integer() and "." not in value else number
            ), f"{value!r} -> number"
        return value, None
    if kind == "boolean" and isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true", f"{value!r} -> boolean"
    if kind == "string" and isinstance(value, (int, float, bool)) and not isinstance(value, bool):
        return str(value), f"{value!r} -> string"
    if kind in ("array", "object") and isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if _fits(parsed, kind):
            return parsed, f"JSON text -> {kind}"
    if kind == "array" and not isinstance(value, list):
        items = schema.get("items") or {}
        item_kind = items.get("type") if isinstance(items, dict) else None
        if item_kind is None or _fits(value, item_kind):
            return [value], "one value -> array"
    return value, None


def match_option(value: str, options: list[Any]) -> str | None:
    """The one option ``value`` stands for: the same up to case and separators (``BUY`` -> ``Buy``,
    ``rear-left`` -> ``rear_left``), else the one option inside the value or the value inside it
    (``First Class`` -> ``first``), else the one close spelling (``engaged`` -> ``engage``)."""
    strings = [o for o in options if isinstance(o, str)]
    if value in strings:
        return value
    key, words = _key(value), _words(value)
    for rule in (
        lambda o: _key(o) == key,
        lambda o: bool(words) and bool(_words(o)) and (_words(o) <= words or words <= _words(o)),
    ):
        found = [o for o in strings if rule(o)]
        if len(found) == 1:
            return found[0]
        if found:
            return None  # two readings: the model chooses, told the options
    close = difflib.get_close_matches(value.lower(), [o.lower() for o in strings], n=2, cutoff=CLOSE_NAME)
    if len(close) == 1:
        return next(o for o in strings if o.lower() == close[0])
    return None


def _words(text: str) -> set[str]:
    """The words of ``text``, lower case (``rear_left`` and ``First Class`` are two words each)."""
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _options_word(schema: Mapping[str, Any]) -> str:
    return "an option its description states" if schema.get("x-stated-options") else "enum"


def _fits(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True


def describe(properties: Mapping[str, Any], required: list[str]) -> str:
    """``name (type, required), ...``: what the model sees of a tool's parameters in an error."""
    parts = []
    for key, value in properties.items():
        prop: Mapping[str, Any] = value if isinstance(value, Mapping) else {}
        kind = prop.get("type", "any")
        found = prop.get("items")
        items: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        enum = prop.get("enum") if isinstance(prop.get("enum"), list) else items.get("enum")
        values = f", one of {enum}" if isinstance(enum, list) and len(str(enum)) <= 200 else ""
        parts.append(f"{key} ({kind}{values}{', required' if key in required else ''})")
    return ", ".join(parts) or "none"
