"""The run's configuration is composed by concern, built once from the CLI, recorded flat in
``run_started.options`` (the shape older runs have) and read back typed."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.cli.run_cmd import run_command
from harnessevolve.core.enums import ExecutorName, Sampling, SandboxName
from harnessevolve.runs.run_config import RunConfig, declarations, flat_keys, section_of

API_ONLY = {"epoch_patience"}
"""Keys set by the library's callers (benchmarks/perf), not by a command-line option."""


def cli_parameters() -> set[str]:
    """The ``run`` command's parameters, by the key each is recorded under."""
    keys = {d.cli_name: d.key for d in declarations()}
    return {keys.get(p, p) for p in inspect.signature(run_command).parameters} - {"resume", "as_json"}


def test_every_run_parameter_is_a_recorded_key_and_every_key_but_the_api_ones_a_parameter() -> None:
    keys = set(flat_keys())
    assert len(keys) == len(flat_keys()), "two sections record the same key"
    assert cli_parameters() - keys == set()
    assert keys - cli_parameters() == API_ONLY


def test_a_parameter_that_is_no_field_is_refused() -> None:
    with pytest.raises(TypeError, match="colour"):
        RunConfig.from_flat({"harness_dir": Path("h"), "benchmark": "b", "colour": "red"})


def test_values_are_typed_and_grouped_by_concern() -> None:
    config = RunConfig.from_flat(
        {"harness_dir": "/h", "benchmark": "b", "sampling": "regret", "sandbox_ro": ["/ro"], "max_hours": 2}
    )
    assert config.harness_dir == Path("/h") and config.loop.sampling is Sampling.REGRET
    assert config.execution.sandbox_ro == ("/ro",) and config.execution.executor is ExecutorName.LOCAL
    assert config.budget.max_hours == 2 and section_of("max_hours") == "budget"
    assert config.replace(generations=7).loop.generations == 7


def test_options_round_trip_through_the_ledger_shape() -> None:
    config = RunConfig.from_flat(
        {
            "harness_dir": Path("/h"),
            "benchmark": "b",
            "gates_file": Path("/g.yaml"),
            "proposers": ("demo", "rules"),
            "adapters": ("m:a",),
            "sandbox": SandboxName.DOCKER,
        }
    )
    doc = config.to_json()
    assert (
        doc["proposers"] == ["demo", "rules"]
        and doc["sandbox"] == "docker"
        and doc["gates_file"] == "/g.yaml"
    )
    assert RunConfig.from_json(doc) == config


def test_an_older_runs_options_read_with_defaults_and_a_newer_key_ignored() -> None:
    recorded = {
        "harness_dir": "/h",
        "benchmark": "shell-basics",
        "generations": 2,
        "model": None,
        "future": 1,
    }
    config = RunConfig.from_json(recorded)
    assert config.loop.generations == 2 and config.scoring.model is None
    assert config.execution.sandbox is SandboxName.BWRAP and config.floor.floor_sample == 8


def test_closed_choices_are_shown_and_refused_by_the_cli(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["run", "-H", str(tmp_path), "-b", "shell-basics", "--sampling", "sometimes"])
    assert result.exit_code == 2
    assert "sometimes" in result.output
    shown = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output
    assert "uniform" in shown and "regret" in shown
    for panel in ("Generation loop", "Budgets", "Execution and sandbox", "Proposers"):
        assert panel in shown
