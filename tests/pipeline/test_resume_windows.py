"""Resume windows: a run killed inside a step whose verdict is not yet in the ledger redoes that
step on ``--resume`` (the null-agent floor check), and a recorded refusal stands."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_crash_points import KILLED, _in_child, _new_harness, _run_dir, after_event
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.runs import events as ev
from harnessevolve.runs.ledger import read_ledger


def always_passing_suite(root: Path) -> Path:
    """Eight tasks per split whose checker passes whatever the agent does: the floor refuses it."""
    (root / "tasks").mkdir(parents=True)
    (root / "benchmark.yaml").write_text("version: 1\nname: always-pass\n")
    for split in ("train", "validation", "test"):
        for i in range(8):
            (root / "tasks" / f"{split}-{i}.yaml").write_text(
                f"version: 1\nid: {split}-{i}\nsplit: {split}\ninstruction: Say done.\n"
                "checker:\n  - {type: command, run: 'true'}\n"
            )
    return root


def run_args(harness: Path, bench: Path) -> list[str]:
    return ["run", "-H", str(harness), "-b", str(bench), "-n", "1", "--batch-size", "2",
            "-m", "scripted/policy:gives_up", "--unsafe-no-sandbox"]  # fmt: skip


def test_crash_point_inside_the_floor_check_redoes_it_on_resume(tmp_path: Path) -> None:
    bench = always_passing_suite(tmp_path / "bench")
    fresh = CliRunner().invoke(app, run_args(_new_harness(tmp_path, "fresh"), bench))
    assert fresh.exit_code == 2 and "null agents" in fresh.output, fresh.output  # a fresh run refuses
    harness = _new_harness(tmp_path, "killed")

    def doomed() -> None:
        with pytest.MonkeyPatch.context() as patch:
            after_event(ev.RunStarted.NAME)(patch)  # killed before the floor's verdict was recorded
            CliRunner().invoke(app, run_args(harness, bench))

    assert _in_child(doomed) == KILLED
    run = _run_dir(harness).name
    resumed = CliRunner().invoke(app, ["run", "-H", str(harness), "--resume", run])
    assert resumed.exit_code == 2, resumed.output
    events = read_ledger(_run_dir(harness) / "ledger.jsonl")
    floors = [e for e in events if isinstance(e, ev.FloorChecked)]
    assert len(floors) == 1 and floors[0].refused  # redone on resume, and refused as a fresh run is
    assert not any(isinstance(e, ev.Baseline) for e in events)  # nothing evolved on it
    again = CliRunner().invoke(app, ["run", "-H", str(harness), "--resume", run])
    assert again.exit_code == 2 and "refused at its start" in again.output, again.output
