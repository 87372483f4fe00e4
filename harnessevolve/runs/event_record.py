"""The shape every ledger event shares (``Event``), its nested records and how they are encoded;
the catalog of events is ``runs/events.py``."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

ENVELOPE = ("v", "ts", "event")
"""Keys every ledger line has besides its event's fields."""


class UnknownEventError(TypeError):
    """A writer named an event, or a field, the catalog does not have (a programming error)."""


@dataclass(frozen=True, kw_only=True)
class Record:
    """A nested payload of an event (a cluster, a gate verdict): written as a JSON object, read
    back as its record. Keys it does not declare are dropped; missing optional ones get defaults."""

    @classmethod
    def from_json(cls, data: Any) -> Self:
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise TypeError(f"{cls.__name__} needs an object, not {type(data).__name__}")
        declared = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in declared})

    def to_json(self) -> dict[str, Any]:
        return {f.name: _encode(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True, kw_only=True)
class ClusterSummary(Record):
    """One cluster of a ``batch_evaluated`` event: failed runs sharing a cause."""

    cause: str
    size: int
    severity: float
    fix_direction: str = ""
    tasks: list[str] = field(default_factory=list)
    divergences: list[dict[str, Any]] = field(default_factory=list)
    """``{task, step, reference_step}`` per failed run: where it left its reference."""


@dataclass(frozen=True, kw_only=True)
class GateVerdictRecord(Record):
    """One gate's decision as the ledger keeps it (``gate.verdict.GateVerdict.to_dict``)."""

    gate: str
    passed: bool
    reason: str = ""
    numbers: dict[str, Any] = field(default_factory=dict)


def _encode(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` (as read from JSON, nested records already built) has the type ``hint``
    declares: containers are checked one level into their items; ``Any`` takes anything."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, arm) for arm in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        return isinstance(value, list | tuple) and all(fits(v, item) for v in value)
    if origin is dict:
        key, item = typing.get_args(hint) or (Any, Any)
        return isinstance(value, dict) and all(fits(k, key) and fits(v, item) for k, v in value.items())
    if origin is typing.ClassVar:
        return True
    return isinstance(value, hint) if isinstance(hint, type) else True


def check_field_types(record: Any) -> None:
    """Raise ``TypeError`` naming the first field whose value is not of its declared type (a list
    where a mapping belongs, a string generation): what a reader would otherwise trip over."""
    cls = type(record)
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    for f in dataclasses.fields(record):
        if f.name in ENVELOPE or f.name not in hints:
            continue
        value = getattr(record, f.name)
        if not fits(value, hints[f.name]):
            name = getattr(cls, "NAME", "") or cls.__name__
            raise TypeError(f"{name}.{f.name} must be {_shown(hints[f.name])}, not {type(value).__name__}")


def check_event_types(event: Any) -> None:
    """``check_field_types`` on a read event and on every record nested in it."""
    check_field_types(event)
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, Record):
                check_field_types(item)


def _shown(hint: Any) -> str:
    return str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")


_RECORD_FIELDS: dict[type[Event], dict[str, tuple[type[Record], bool]]] = {}


def _record_fields(cls: type[Event]) -> dict[str, tuple[type[Record], bool]]:
    """Fields of ``cls`` that hold records: name -> (record class, whether a list of them)."""
    if cls in _RECORD_FIELDS:
        return _RECORD_FIELDS[cls]
    out: dict[str, tuple[type[Record], bool]] = _RECORD_FIELDS.setdefault(cls, {})
    for name, hint in typing.get_type_hints(cls).items():
        arms = (
            typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        )
        for arm in arms:
            inner = typing.get_args(arm)
            if (
                typing.get_origin(arm) is list
                and inner
                and isinstance(inner[0], type)
                and issubclass(inner[0], Record)
            ):
                out[name] = (inner[0], True)
            elif isinstance(arm, type) and issubclass(arm, Record):
                out[name] = (arm, False)
    return out


@dataclass(frozen=True, kw_only=True)
class Event:
    """One ledger event. Subclasses set ``NAME`` and declare their fields.

    The envelope: ``ts`` is the time the line was written (set on records read from a ledger,
    ``None`` on records built to be written; not part of equality); ``v`` is not kept, since every
    line read is migrated to ``LEDGER_VERSION``; ``event`` is :attr:`event_name`."""

    NAME: ClassVar[str] = ""
    ts: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        """Nested payloads given as JSON objects (a line read back, a writer's ``to_dict()``)
        become their records; anything else that does not fit raises TypeError."""
        for name, (record, many) in _record_fields(type(self)).items():
            value = getattr(self, name)
            if value is None:
                continue
            if many:
                if not isinstance(value, list | tuple):
                    raise TypeError(f"{self.NAME}.{name} must be a list")
                object.__setattr__(self, name, [record.from_json(v) for v in value])
            else:
                object.__setattr__(self, name, record.from_json(value))

    @property
    def event_name(self) -> str:
        """The event's name on disk (``NAME``; an :class:`UnknownEvent`'s own name)."""
        return self.NAME

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON object: ``ts`` (when read), ``event`` and its fields."""
        head: dict[str, Any] = {"ts": self.ts} if self.ts is not None else {}
        return {**head, "event": self.event_name, **self.fields()}

    def fields(self) -> dict[str, Any]:
        """The event's fields as written: required ones always, optional ones when set."""
        out: dict[str, Any] = {}
        for f in payload_fields(type(self)):
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            out[f.name] = _encode(value)
        return out


def payload_fields(cls: type[Event]) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of event class ``cls`` that are written as its payload (the envelope is not)."""
    return tuple(f for f in dataclasses.fields(cls) if f.name not in ENVELOPE)


@dataclass(frozen=True, kw_only=True)
class UnknownEvent(Event):
    """A line this version cannot type: an event name the catalog does not know (written by a later
    version, or by hand), or a known name whose fields do not fit its record (``reason`` says
    which). ``payload`` is the line less its envelope. Readers skip or show it; never written."""

    name: str
    payload: dict[str, Any]
    reason: str = "unknown event"
    line: int | None = None
    """The line of the ledger it was read from."""

    @property
    def event_name(self) -> str:
        return self.name

    def fields(self) -> dict[str, Any]:
        return dict(self.payload)


@dataclass(frozen=True, kw_only=True)
class CandidateDetails(Event):
    """What a proposer said about its candidate (``Candidate.to_record()``); no file contents."""

    summary: str | None = None
    rationale: str | None = None
    proposer: str | None = None
    model: str | None = None
    targets: list[str] | None = None
    target_tasks: list[str] | None = None
    paths: list[str] | None = None
    edits: dict[str, Any] | None = None
    evidence: list[Any] | None = None
    revision: int | None = None
    feedback: list[str] | None = None
