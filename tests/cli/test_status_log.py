"""`status` and `log` through the CLI on a real scripted run: finished, running, stale lock, --follow."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[1] / "report"))

from scripted_run import (  # noqa: E402
    copy_run,
    dead_pid,
    ledger_events,
    make_scripted_run,
    write_events,
    write_lock,
)

from harnessevolve.cli.app import app  # noqa: E402


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_scripted_run(tmp_path_factory.mktemp("status"))


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_status_of_a_finished_run(finished_run: Path) -> None:
    harness = str(finished_run.parents[2])
    code, out = invoke("status", "--harness", harness)
    assert code == 0, out
    assert finished_run.name in out and "finished" in out
    assert "2 of 2" in out and "1 accepted, 1 not kept of 2" in out
    assert "last event" in out and "run_finished" in out
    code, out = invoke("status", "--harness", harness, "--json")
    doc = json.loads(out)
    assert doc["state"] == "finished" and doc["generation"] == 2 and len(doc["accepted"]) == 1
    assert doc["best_validation"] > doc["baseline_validation"] and doc["elapsed_s"] > 0
    assert doc["last_event"]["event"] == "run_finished"


def test_status_of_a_run_whose_lock_holder_died(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path)
    write_events(run, ledger_events(run)[:-3])
    write_lock(run, dead_pid())
    code, out = invoke("status", str(run))
    assert code == 0, out
    assert "stale-lock" in out and "which is gone" in out
    assert json.loads(invoke("status", str(run), "--json")[1])["state"] == "stale-lock"
    write_lock(run, os.getpid())
    assert json.loads(invoke("status", str(run), "--json")[1])["state"] == "running"


def test_log_prints_one_line_per_event(finished_run: Path) -> None:
    events = ledger_events(finished_run)
    code, out = invoke("log", str(finished_run))
    assert code == 0, out
    lines = out.splitlines()
    assert len(lines) == len(events)
    assert "run_started" in lines[0] and "run_finished" in lines[-1]
    assert any("candidate_reverted" in line and "performance gate" in line for line in lines)
    code, out = invoke(
        "log", finished_run.name, "--harness", str(finished_run.parents[2]), "--json", "-n", "2"
    )
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == events[-2:]


def test_log_follow_prints_events_as_they_come_until_the_run_ends(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path)
    events = ledger_events(run)
    write_events(run, events[:3])
    write_lock(run, os.getpid())

    def writer() -> None:
        with (run / "ledger.jsonl").open("a") as handle:
            for e in events[3:]:
                time.sleep(0.02)
                line = json.dumps(e) + "\n"
                handle.write(line[:10])  # a torn line first: the follower waits for the rest
                handle.flush()
                handle.write(line[10:])
                handle.flush()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        code, out = invoke("log", str(run), "--follow", "--json", "--interval", "0.05")
    finally:
        thread.join()
    assert code == 0, out
    assert [json.loads(line)["event"] for line in out.splitlines()] == [e["event"] for e in events]


def test_log_follow_stops_when_the_lock_holder_is_gone(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path)
    write_events(run, ledger_events(run)[:5])
    write_lock(run, dead_pid())
    code, out = invoke("log", str(run), "--follow", "--interval", "0.05")
    assert code == 0 and out.strip().endswith("stale-lock")


def test_status_and_log_without_runs(tmp_path: Path) -> None:
    for command in ("status", "log"):
        code, out = invoke(command, "--harness", str(tmp_path))
        assert code == 2 and "no runs yet" in out
