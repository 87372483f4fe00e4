"""kill -9 right after each kind of ledger event (real processes, the scripted agent), then
``--resume``: the final harness tree, the commits, the spend and the generation rows equal an
unkilled run's; no temp file left in the harness or $TMPDIR (benchmarks/perf/kill_at_events.py;
the script covers every event type of a 4-generation run, this test a 2-generation one)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "perf"))
import kill_at_events  # noqa: E402


@pytest.mark.slow
def test_every_event_type_resumes_to_the_unkilled_result(capsys) -> None:
    code = kill_at_events.main(["--generations", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "event types: resumed to the reference's result" in out
    rows = [line for line in out.splitlines() if line.endswith("same tree, same commits, clean")]
    assert len(rows) >= 10, out  # run_started ... epoch_finished: every kind the run writes
