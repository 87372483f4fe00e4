"""Shared fixtures: a fresh harness repo, the built-in benchmark, scripted agent policies."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

# Piped CLI output is 240 columns wide unless COLUMNS says otherwise (harnessevolve.cli.ui); the
# tests read that output, so a COLUMNS from the shell or from pytest-xdist's workers (which set 80)
# must not reach the console built at import below.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
# Under pytest-xdist (``make test``) the embedded model shares the cores with the other workers,
# where llama.cpp runs fastest on one thread (harnessevolve.models.local_env.default_threads).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("HARNESSEVOLVE_LOCAL_THREADS", "1")

sys.path.insert(0, str(Path(__file__).parent))

from policies import FamilyLearner  # noqa: E402

from harnessevolve.cli.app import app  # noqa: E402
from harnessevolve.core.tasks import Benchmark, load_benchmark  # noqa: E402
from harnessevolve.models.scripted import register_script, unregister_script  # noqa: E402


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.delenv("HARNESSEVOLVE_DEBUG", raising=False)
    # the user's own reference folder (and the judge cache) stay out of the tests, both ways
    monkeypatch.setenv("HARNESSEVOLVE_REFERENCES", str(tmp_path_factory.mktemp("user-references")))
    for role in ("AUTHOR", "COMMITTER"):  # tests commit with plain git too; CI may have no identity
        monkeypatch.setenv(f"GIT_{role}_NAME", "harnessevolve tests")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "tests@harnessevolve.invalid")


@pytest.fixture(scope="session")
def shell_basics() -> Benchmark:
    return load_benchmark("shell-basics")


@pytest.fixture
def learner(shell_basics: Benchmark):
    """``scripted/family-learner``: solves tasks whose family has a demonstration; >1 demo confuses it."""
    register_script("family-learner", FamilyLearner(shell_basics))
    yield "scripted/family-learner"
    unregister_script("family-learner")


@pytest.fixture
def scripts():
    """``scripts(name, policy_or_replies)`` registers a scripted model for the test and returns its
    model name (``scripted/NAME``); every one is unregistered afterwards."""
    names: list[str] = []

    def register(name: str, policy) -> str:
        register_script(name, policy)
        names.append(name)
        return f"scripted/{name}"

    yield register
    for name in names:
        unregister_script(name)


@pytest.fixture
def cli() -> CliRunner:
    return CliRunner()


@pytest.fixture
def harness_dir(tmp_path: Path, cli: CliRunner) -> Path:
    target = tmp_path / "harness"
    result = cli.invoke(app, ["init", str(target)])
    assert result.exit_code == 0, result.output
    return target
