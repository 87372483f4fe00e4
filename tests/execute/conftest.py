"""Fixtures of the execute tests."""

from __future__ import annotations

import pytest

from harnessevolve.sandbox import limits


@pytest.fixture
def count_mountinfo_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often /proc/self/mountinfo is read (``limits.workspace_mounts``) from here on."""
    reads = [0]
    real = limits.workspace_mounts

    def counted() -> dict[str, str]:
        reads[0] += 1
        return real()

    monkeypatch.setattr(limits, "workspace_mounts", counted)
    return reads
