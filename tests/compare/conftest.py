"""One comparison of every arm kind over two seeds, made once for the tests that read it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compare_plans import compare, every_arm, hand_harness, subset, table_of, write_plan


@pytest.fixture(scope="session")
def session_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What tests/conftest.py's ``_clean_env`` sets per test, for the fixtures made once."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("HARNESSEVOLVE_DEBUG", raising=False)
        patch.setenv("HARNESSEVOLVE_REFERENCES", str(tmp_path_factory.mktemp("compare-user-references")))
        for role in ("AUTHOR", "COMMITTER"):
            patch.setenv(f"GIT_{role}_NAME", "harnessevolve tests")
            patch.setenv(f"GIT_{role}_EMAIL", "tests@harnessevolve.invalid")
        yield


@pytest.fixture(scope="session")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return subset(tmp_path_factory.mktemp("compare-bench"))


@pytest.fixture(scope="session")
def hand(tmp_path_factory: pytest.TempPathFactory, bench: Path, session_env: None) -> Path:
    return hand_harness(tmp_path_factory.mktemp("compare-hand"), bench)


@pytest.fixture(scope="session")
def full(
    tmp_path_factory: pytest.TempPathFactory, bench: Path, hand: Path, session_env: None
) -> tuple[Path, Path, Any]:
    """(plan, output folder, the command's result) of every arm over seeds 0 and 1."""
    root = tmp_path_factory.mktemp("compare-full")
    plan = write_plan(root, **every_arm(bench, hand))
    out = root / "out"
    result = compare(plan, "--out", out, "--json")
    table_of(result)  # it succeeded
    return plan, out, result
