"""Module-wide scripted runs for the report tests (each run takes seconds)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from scripted_run import make_scripted_run  # noqa: E402


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two generations, one candidate each: one accepted, one reverted (both commits in git)."""
    return make_scripted_run(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module")
def multi_candidate_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two candidates a generation: the losers are never committed, their changes are in the run folder."""
    return make_scripted_run(tmp_path_factory.mktemp("run-k2"), "--candidates", "2")
