"""The harness lock: atomic (flock), exactly one of two simultaneous starters gets it, a dead or
junk owner is a stale lock taken over, a live one refuses."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from harnessevolve.core.errors import RunLockedError
from harnessevolve.runs.rundir import HarnessLock

DEAD_PID = 2**22 + 12345


def _contend(harness: str, barrier, results, index: int) -> None:
    lock = HarnessLock(Path(harness))
    barrier.wait()
    try:
        lock.acquire(f"run-{index}")
    except RunLockedError:
        results.put(None)
        return
    results.put(index)
    time.sleep(0.05)
    lock.release()


def test_two_starters_arriving_together_never_both_hold_it(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    for trial in range(40):
        harness = tmp_path / f"h{trial}"
        (harness / ".harnessevolve").mkdir(parents=True)
        (harness / ".harnessevolve" / "lock").write_text(json.dumps({"pid": DEAD_PID, "run_id": "dead"}))
        barrier, results = context.Barrier(2), context.Queue()
        workers = [context.Process(target=_contend, args=(str(harness), barrier, results, i)) for i in (0, 1)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
        holders = [r for r in (results.get(timeout=5), results.get(timeout=5)) if r is not None]
        assert len(holders) == 1, f"trial {trial}: {holders}"


@pytest.mark.parametrize(
    "content", ['{"pid": "abc", "run_id": "x"}', "not json", "[1, 2]", "", '{"pid": null}']
)
def test_a_junk_lock_is_stale_and_taken_over(tmp_path: Path, content: str) -> None:
    path = tmp_path / ".harnessevolve" / "lock"
    path.parent.mkdir()
    path.write_text(content)
    lock = HarnessLock(tmp_path)
    lock.acquire("mine")
    assert json.loads(path.read_text())["run_id"] == "mine"
    lock.release()
    assert not path.exists()


def test_a_live_owner_refuses_and_keeps_its_lock(tmp_path: Path) -> None:
    first = HarnessLock(tmp_path)
    first.acquire("first")
    with pytest.raises(RunLockedError, match="first"):
        HarnessLock(tmp_path).acquire("second")
    assert json.loads(first.path.read_text())["run_id"] == "first"
    first.release()
    second = HarnessLock(tmp_path)
    second.acquire("second")
    assert second.stale_owner is None
    second.release()


def test_a_dead_owner_is_reported_as_stale(tmp_path: Path) -> None:
    path = tmp_path / ".harnessevolve" / "lock"
    path.parent.mkdir()
    path.write_text(json.dumps({"pid": DEAD_PID, "run_id": "dead"}))
    lock = HarnessLock(tmp_path)
    lock.acquire("mine")
    assert lock.stale_owner == {"pid": DEAD_PID, "run_id": "dead"}
    assert json.loads(path.read_text())["pid"] == os.getpid()
    lock.release()
