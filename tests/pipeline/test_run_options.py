"""The run's options are listed once: the ``run`` command's parameters are RunOptions' fields."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from harnessevolve.cli.run_cmd import run
from harnessevolve.pipeline.run import CLI_NAMES, RunOptions

API_ONLY = {"epoch_patience"}
"""Fields set by the library's callers (benchmarks/perf), not by a command-line option."""


def cli_parameters() -> set[str]:
    command = inspect.unwrap(run)
    return {CLI_NAMES.get(p, p) for p in inspect.signature(command).parameters} - {"resume", "as_json"}


def test_every_run_parameter_is_a_field_and_every_field_but_the_api_ones_a_parameter() -> None:
    fields = {f.name for f in dataclasses.fields(RunOptions)}
    assert cli_parameters() - fields == set()
    assert fields - cli_parameters() == API_ONLY


def test_a_parameter_that_is_no_field_is_refused() -> None:
    with pytest.raises(TypeError, match="colour"):
        RunOptions.from_cli({"harness": Path("h"), "benchmark": "b", "colour": "red"})


def test_options_round_trip_through_the_ledger_shape() -> None:
    options = RunOptions.from_cli(
        {"harness": Path("/h"), "benchmark": "b", "gates": Path("/g.yaml")},
        proposer=("demo", "rules"),
        adapter=("m:a",),
        sandbox_ro=("/ro",),
    )
    assert options.harness_dir == Path("/h") and options.proposers == ("demo", "rules")
    assert RunOptions.from_json(options.to_json()) == options
