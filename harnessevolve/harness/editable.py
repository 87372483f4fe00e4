"""What a harness's ``editable`` list lets the optimizer change.

Each entry is a glob of harness paths (``prompts/*.md``, ``agent.py``) that may change as a whole,
or ``harness.yaml#SECTION`` (``harness.yaml#loop``, ``harness.yaml#recovery``): ``harness.yaml``
may then change in those top-level sections only, so the loop can be tuned while the model, the
tools and the ``editable`` list itself stay as the user wrote them.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatch

SECTION_MARK = "#"


def may_edit(path: str, editable: Sequence[str]) -> bool:
    """True when ``path`` may change as a whole (a glob entry matches it)."""
    return any(SECTION_MARK not in p and fnmatch(path, p) for p in editable)


def editable_sections(path: str, editable: Sequence[str]) -> frozenset[str]:
    """The top-level sections of the YAML file ``path`` that ``harness.yaml#SECTION`` entries open."""
    return frozenset(
        p.split(SECTION_MARK, 1)[1]
        for p in editable
        if SECTION_MARK in p and p.split(SECTION_MARK, 1)[0] == path
    )


def may_edit_section(path: str, section: str, editable: Sequence[str]) -> bool:
    return may_edit(path, editable) or section in editable_sections(path, editable)


def change_allowed(path: str, before: str | None, after: str | None, editable: Sequence[str]) -> bool:
    """True when changing ``path`` from ``before`` to ``after`` (None: absent) is allowed: the whole
    path is editable, or both versions are YAML mappings that differ only in editable sections."""
    if may_edit(path, editable):
        return True
    sections = editable_sections(path, editable)
    if not sections or before is None or after is None:
        return False
    import yaml

    from harnessevolve.core.documents import bounded_yaml

    try:
        old, new = bounded_yaml(before), bounded_yaml(after)
    except (yaml.YAMLError, ValueError):
        return False
    if not isinstance(old, dict) or not isinstance(new, dict):
        return False
    changed = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
    return changed <= sections
