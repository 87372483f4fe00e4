"""`gate` with no -H and no -b checks the harness in the current folder against the benchmark of its
latest run, and a pass on a tie says so (text and --json). A run refuses ties by default; the
shipped ``--gates paper`` (HarnessEvolve's accept-on-tie) keeps them; ``gate`` in CI passes a tie."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessevolve.cli.app import app


def test_gate_defaults_and_a_tie_is_labelled(cli, harness_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(harness_dir)
    model = ["-m", "scripted/policy:gives_up"]
    result = cli.invoke(app, ["gate", *model])
    assert result.exit_code == 2 and "no --benchmark given" in result.output, result.output
    ran = cli.invoke(
        app, ["run", "-b", "shell-basics", "-n", "1", "--batch-size", "4", "--proposer", "demo", *model]
    )
    assert "reverted by performance" in ran.output and "accepted (tie)" not in ran.output, ran.output
    ran = cli.invoke(
        app,
        [
            "run",
            "-b",
            "shell-basics",
            "-n",
            "1",
            "--batch-size",
            "4",
            "--proposer",
            "demo",
            "--gates",
            "paper",
        ]
        + model,
    )
    assert "accepted (tie)" in ran.output, ran.output
    result = cli.invoke(app, ["gate", "--batch-size", "4", *model])
    assert result.exit_code == 0, result.output
    assert "candidate passes on a tie" in result.output and "tie: batch gain +0.000" in result.output
    doc = json.loads(cli.invoke(app, ["gate", "--batch-size", "4", "--json", *model]).output)
    assert doc["passed_on_tie"] is True and doc["benchmark"] == "shell-basics"
