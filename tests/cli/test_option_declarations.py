"""Each run option is declared once, on its configuration field (flags, help, bounds): ``run`` and
``gate`` are built from those declarations, and the bounds hold on the command line and in a
recorded or hand-made configuration alike."""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path
from typing import Any

import pytest
import typer

from harnessevolve.cli import gate_cmd, run_cmd
from harnessevolve.cli.app import app
from harnessevolve.core.option_spec import OptionValueError
from harnessevolve.runs.run_config import RunConfig, declarations


def command_params(name: str) -> dict[str, Any]:
    """The click parameters of command ``name`` as typer builds them."""
    command: Any = typer.main.get_command(app)
    return {p.name: p for p in command.commands[name].params if p.name}


def test_run_offers_every_declared_option_and_only_those() -> None:
    params = command_params("run")
    declared = {d.cli_name for d in declarations()}
    assert set(params) == declared | {"resume", "as_json"}
    assert len(inspect.signature(run_cmd.run).parameters) <= 12


def test_gate_shares_run_declarations_instead_of_copying_them() -> None:
    run, gate = command_params("run"), command_params("gate")
    shared = {d.cli_name for d in declarations() if d.key in gate_cmd.GATE_OPTIONS}
    assert shared <= set(gate)
    for name in shared - {"benchmark"}:  # gate's benchmark adds its default to the same help
        assert gate[name].opts == run[name].opts, name
        assert getattr(gate[name], "help", None) == getattr(run[name], "help", None), name
    assert getattr(gate["benchmark"], "help", "").startswith(getattr(run["benchmark"], "help", ""))


def test_every_count_a_user_can_raise_has_an_upper_bound() -> None:
    unbounded = [
        d.key
        for d in declarations()
        if d.option.min is not None and d.option.max is None  # a bounded-below number with no ceiling
    ]
    assert unbounded == []


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--candidates", "0"], "--candidates"),
        (["--candidates", "65"], "--candidates"),
        (["--generations", "100001"], "--generations"),
        (["--max-revisions", "21"], "--max-revisions"),
        (["--concurrency", "5000"], "--concurrency"),
        (["--evolve-threshold", "1.5"], "--evolve-threshold"),
    ],
)
def test_run_refuses_an_option_out_of_its_bounds(cli, harness_dir: Path, args: list[str], flag: str) -> None:
    result = cli.invoke(app, ["run", "-H", str(harness_dir), "-b", "shell-basics", *args])
    assert result.exit_code == 2, result.output
    assert flag in result.output
    assert not (harness_dir / ".harnessevolve" / "runs").exists()  # refused before anything started


def test_gate_refuses_a_required_control_of_k_0_and_a_huge_k(cli, harness_dir: Path) -> None:
    base = ["gate", "-H", str(harness_dir), "-b", "shell-basics", "--split", "test"]
    result = cli.invoke(app, [*base, "--require-control", "--control-k", "0"])
    assert result.exit_code == 2 and "control" in result.output
    result = cli.invoke(app, [*base, "--control-k", "1000"])
    assert result.exit_code == 2 and "--control-k" in result.output


@pytest.mark.parametrize(
    "values, flag",
    [
        ({"generations": 0}, "--generations"),
        ({"batch_size": 10**9}, "--batch-size"),
        ({"candidates": True}, "--candidates"),
        ({"max_infra_share": math.nan}, "--max-infra-share"),
        ({"seed": -1}, "--seed"),
        ({"concurrency": "4"}, "--concurrency"),
    ],
)
def test_the_config_loader_enforces_the_same_bounds(values: dict[str, object], flag: str) -> None:
    with pytest.raises(OptionValueError) as err:
        RunConfig.from_json(values, where="ledger.jsonl")
    assert err.value.field == flag and "ledger.jsonl" in err.value.message


def test_in_bounds_values_load_as_given() -> None:
    config = RunConfig.from_json({"generations": 10_000, "candidates": 64, "max_infra_share": 0.0})
    assert (config.loop.generations, config.loop.candidates, config.budget.max_infra_share) == (
        10_000,
        64,
        0.0,
    )


def test_resume_refuses_recorded_options_out_of_bounds(cli, harness_dir: Path) -> None:
    model = "scripted/policy:gives_up"
    result = cli.invoke(
        app,
        ["run", "-H", str(harness_dir), "-b", "shell-basics", "-n", "1", "--batch-size", "2", "-m", model],
    )
    assert result.exit_code in (0, 1), result.output
    ledger = next((harness_dir / ".harnessevolve" / "runs").glob("*/ledger.jsonl"))
    lines = ledger.read_text().splitlines()
    first = json.loads(lines[0])
    first["options"]["candidates"] = 10**6  # a hand-edited or planted ledger
    ledger.write_text("\n".join([json.dumps(first), *lines[1:2]]) + "\n")
    result = cli.invoke(app, ["run", "-H", str(harness_dir), "--resume", ledger.parent.name])
    assert result.exit_code == 2, result.output
    assert "--candidates" in result.output and "Traceback" not in result.output


def all_commands(command: Any, prefix: str = "") -> list[tuple[str, Any]]:
    subs = getattr(command, "commands", None)
    if not subs:
        return [(prefix, command)]
    return [pair for name, sub in subs.items() for pair in all_commands(sub, f"{prefix} {name}".strip())]


def bounds(param: Any) -> tuple[Any, Any]:
    """(min, max) of a parameter, wherever this typer keeps them (the option or its click type)."""
    kind = getattr(param, "type", None)
    low = getattr(param, "min", None) if hasattr(param, "min") else getattr(kind, "min", None)
    high = getattr(param, "max", None) if hasattr(param, "max") else getattr(kind, "max", None)
    return low, high


def test_every_bounded_numeric_option_of_every_command_has_a_ceiling() -> None:
    """A count with a floor and no ceiling runs a typo (``--control-k 1000000000``) until killed."""
    params = [
        (name, p) for name, command in all_commands(typer.main.get_command(app)) for p in command.params
    ]
    floored = [(name, p) for name, p in params if bounds(p)[0] is not None]
    assert len(floored) >= 20  # the check reads the bounds (run alone declares more than that)
    open_ended = [f"{name} {p.opts[0]}" for name, p in floored if bounds(p)[1] is None]
    assert open_ended == []
