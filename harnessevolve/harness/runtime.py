"""The runtime components a harness may turn on (``harness.yaml``: ``memory``, ``progress``,
``recovery``, ``world_model``; docs/runtime.md): their settings as frozen data, loaded and checked
here so ``validate`` names the file and field of a malformed entry, rule or oversized file.

Each is off unless its key is present (and its ``enabled`` is not false); ``execute/`` turns the
ones that are on into the loop's hooks (``execute/components.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harnessevolve.core.documents import bounded_yaml
from harnessevolve.core.errors import HarnessError
from harnessevolve.core.schema import check

MEMORY_VERSION = 1
MEMORY_FOLDER = "memory/"
WORLD_MODEL_FILE = "world_model.md"
ENTRY_HINT = "an entry has version: 1, task, lesson and outcome (success|failure); see docs/runtime.md"


@dataclass(frozen=True)
class MemoryEntry:
    """One experience-memory entry (``memory/<id>.yaml``, schemas/memory_entry.schema.json)."""

    path: str
    task: str
    lesson: str
    outcome: str
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class MemorySettings:
    top_k: int = 3
    """Entries placed in the system prompt per task."""
    max_entries: int = 200
    """Most entries ``memory/`` may hold (``validate`` refuses more)."""


@dataclass(frozen=True)
class RecoveryRule:
    """One rule: on ``event`` (a loop event), do ``action`` (see docs/runtime.md)."""

    event: str
    action: str
    note: str = ""
    times: int = 2
    within: int = 2
    temperature: float = 0.7
    max_fires: int = 1

    @property
    def name(self) -> str:
        return f"{self.event}->{self.action}"


@dataclass(frozen=True)
class ProgressSettings:
    max_chars: int = 2000


@dataclass(frozen=True)
class WorldModelSettings:
    file: str = WORLD_MODEL_FILE
    max_chars: int = 4000
    text: str = ""
    lookahead: int = 1
    """Candidate replies per step (1: off); see ``execute/world_model.py``."""


@dataclass(frozen=True)
class RuntimeComponents:
    """The components a harness turns on; ``None`` (or no rules) is off."""

    memory: MemorySettings | None = None
    entries: tuple[MemoryEntry, ...] = ()
    progress: ProgressSettings | None = None
    recovery: tuple[RecoveryRule, ...] = ()
    world_model: WorldModelSettings | None = None

    @property
    def any_on(self) -> bool:
        return bool(self.memory or self.progress or self.recovery or self.world_model)

    def names(self) -> tuple[str, ...]:
        on = {
            "memory": self.memory is not None,
            "progress": self.progress is not None,
            "recovery": bool(self.recovery),
            "world_model": self.world_model is not None,
        }
        return tuple(name for name, is_on in on.items() if is_on)


def _on(doc: dict[str, Any], key: str) -> dict[str, Any] | None:
    section = doc.get(key)
    if not isinstance(section, dict) or section.get("enabled") is False:
        return None
    return section


def memory_entry(path: str, text: str) -> MemoryEntry:
    """Parse and check one ``memory/*.yaml`` entry; ``HarnessError`` names the file and field."""
    import yaml

    try:
        doc = bounded_yaml(text)
    except yaml.YAMLError as exc:
        raise HarnessError(f"invalid YAML: {exc}".splitlines()[0], file=path, field="(top level)") from None
    try:
        check(doc, "memory_entry", file=path, error=HarnessError)
    except HarnessError as exc:
        exc.hint = ENTRY_HINT
        raise
    return MemoryEntry(path, doc["task"], doc["lesson"], doc["outcome"], tuple(doc.get("sources", ())))


def memory_entries(files: dict[str, str]) -> tuple[MemoryEntry, ...]:
    """Every entry under ``memory/`` (sorted by path); any other file there is an error."""
    out = []
    for path in sorted(p for p in files if p.startswith(MEMORY_FOLDER)):
        if not path.endswith(".yaml"):
            raise HarnessError(
                "memory/ holds only entries (*.yaml)", file=path, hint="rename it to .yaml or move it out"
            )
        out.append(memory_entry(path, files[path]))
    return tuple(out)


def load_runtime(doc: dict[str, Any], files: dict[str, str]) -> RuntimeComponents:
    """The runtime components of a checked ``harness.yaml`` document and the harness's files.

    Memory entries are checked whenever ``memory/`` exists (a malformed entry is found before it is
    turned on); a world model only when it is on."""
    entries = memory_entries(files)
    memory = None
    if (section := _on(doc, "memory")) is not None:
        memory = MemorySettings(section.get("top_k", 3), section.get("max_entries", 200))
        if len(entries) > memory.max_entries:
            raise HarnessError(
                f"memory/ holds {len(entries)} entries, more than memory.max_entries ({memory.max_entries})",
                file="harness.yaml",
                field="memory.max_entries",
                hint="merge or delete entries, or raise memory.max_entries",
            )
    progress = None
    if (section := _on(doc, "progress")) is not None:
        progress = ProgressSettings(section.get("max_chars", 2000))
    rules: tuple[RecoveryRule, ...] = ()
    if (section := _on(doc, "recovery")) is not None:
        rules = tuple(RecoveryRule(**rule) for rule in section.get("rules", ()))
    world = None
    if (section := _on(doc, "world_model")) is not None:
        path = section.get("file", WORLD_MODEL_FILE)
        if path not in files:
            raise HarnessError(
                f"{path} does not exist",
                file="harness.yaml",
                field="world_model.file",
                hint=f"create {path} or point world_model.file at an existing file",
            )
        cap = section.get("max_chars", 4000)
        if len(files[path]) > cap:
            raise HarnessError(
                f"{len(files[path])} characters, over the prompt cap world_model.max_chars ({cap})",
                file=path,
                field="(text)",
                hint="shorten the world model or raise world_model.max_chars",
            )
        world = WorldModelSettings(path, cap, files[path], section.get("lookahead", 1))
    return RuntimeComponents(memory, entries if memory else (), progress, rules, world)


__all__ = [
    "MEMORY_VERSION",
    "MemoryEntry",
    "MemorySettings",
    "ProgressSettings",
    "RecoveryRule",
    "RuntimeComponents",
    "WorldModelSettings",
    "load_runtime",
    "memory_entries",
    "memory_entry",
]
