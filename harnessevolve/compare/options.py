"""Run options written in a plan (an evolve arm's ``options:``, the plan's ``execution:``): each
checked against its one declaration on the run configuration (``runs/run_config.py``), by name,
type and bounds, and refused naming the plan file and the field."""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.option_spec import OptionValueError, check_value
from harnessevolve.runs.run_config import Declared, declarations

PLAN_HINT = "see docs/compare-command.md for every field of a plan"


class PlanError(HarnessEvolveError):
    """A comparison plan is malformed: names the plan file and the field (``arms[1].k``)."""

    default_hint = PLAN_HINT


RESERVED = {
    "harness_dir": "the plan's `harness` is every arm's seed harness",
    "benchmark": "the plan's `benchmark` is every arm's benchmark",
    "model": "the plan's `model` is every arm's agent model",
    "seed": "the plan's `seeds` give each cell its seed",
    "cache": "compare keeps each evolve run's rollout cache (what makes --resume cheap)",
    "adapters": "not yet supported by compare",
    "track": "not yet supported by compare",
}
"""Run options an evolve arm may not set, and why."""


@dataclass(frozen=True)
class PlanField:
    """Where a value sits: the plan file and its field path (``arms[1].options.generations``)."""

    file: Path
    field: str

    def error(self, message: str, hint: str | None = None) -> PlanError:
        return PlanError(message, file=str(self.file), field=self.field, hint=hint)

    def child(self, name: str | int) -> PlanField:
        return PlanField(
            self.file, f"{self.field}[{name}]" if isinstance(name, int) else f"{self.field}.{name}"
        )


def run_options(section: str | None = None) -> dict[str, Declared]:
    """Every declared run option by each name a plan may spell it with (flat key, command-line
    name, long flag; dashes or underscores), restricted to ``section`` when given."""
    names: dict[str, Declared] = {}
    for declared in declarations():
        if section is not None and declared.section != section:
            continue
        spellings = {declared.key, declared.cli_name}
        spellings |= {flag[2:] for flag in declared.option.flags if flag.startswith("--")}
        for spelling in spellings:
            names[spelling] = declared
            names[spelling.replace("-", "_")] = declared
            names[spelling.replace("_", "-")] = declared
    return names


def typed_value(hint: Any, value: Any, where: PlanField, *, base: Path) -> Any:
    """``value`` (as YAML gave it) as the option's type says; a path relative to ``base`` (the
    plan's folder) when it exists there. Raises ``PlanError`` naming ``where``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        return typed_value(inner[0], value, where, base=base) if len(inner) == 1 else value
    if value is None:
        raise where.error("must not be empty", "give a value or leave the field out")
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        choices = [str(m.value) for m in hint]
        if not isinstance(value, str) or value not in choices:
            raise where.error(
                f"{value!r} is not one of {', '.join(choices)}", f"choose one of: {', '.join(choices)}"
            )
        return hint(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise where.error(f"must be true or false, not {value!r}", "write true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise where.error(f"must be a whole number, not {value!r}", "e.g. 2")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise where.error(f"must be a number, not {value!r}", "e.g. 0.5")
        return float(value)
    if hint is str:
        if not isinstance(value, str) or not value.strip():
            raise where.error(
                f"must be a non-empty string, not {value!r}", "quote it if YAML reads it otherwise"
            )
        return value
    if hint is Path:
        if not isinstance(value, str) or not value.strip():
            raise where.error(f"must be a path, not {value!r}", "a path relative to the plan's folder")
        beside = base / value
        return beside.resolve() if beside.exists() else Path(value)
    if origin is tuple:
        items = [s.strip() for s in value.split(",")] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(isinstance(s, str) and s for s in items):
            raise where.error(f"must be a list of names, not {value!r}", "e.g. [demo, rules]")
        return tuple(items)
    return value


def checked_options(
    given: Any,
    where: PlanField,
    *,
    base: Path,
    section: str | None = None,
    reserved: Mapping[str, str] = RESERVED,
) -> dict[str, Any]:
    """A plan's mapping of run options as flat keys with typed, bounded values."""
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise where.error(
            f"must be a mapping of run options, not {type(given).__name__}", "e.g. {generations: 2}"
        )
    known = run_options(section)
    out: dict[str, Any] = {}
    for name, value in given.items():
        at = where.child(str(name))
        declared = known.get(str(name))
        if declared is None:
            listed = sorted({d.key for d in known.values()} - set(reserved))
            raise at.error("unknown option", f"options: {', '.join(listed)}")
        if declared.key in reserved:
            raise at.error("not an option of an arm", reserved[declared.key])
        if declared.key in out:
            raise at.error("given twice (under two spellings)", "keep one")
        typed = typed_value(declared.hint, value, at, base=base)
        try:
            check_value(declared.key, typed, declared.option)
        except OptionValueError as exc:
            raise at.error(exc.message, exc.hint) from None
        out[declared.key] = typed
    return out
