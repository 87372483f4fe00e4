"""Every run file carries its version: newer ones are refused, unversioned (older) ones read as v1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessevolve.runs.files import (
    LOCK_VERSION,
    REGRET_VERSION,
    RunFileError,
    check_version,
    read_json_file,
    read_regret,
    write_regret,
)
from harnessevolve.runs.rundir import HarnessLock

ROW = {"pass_without_hint": 0.0, "pass_with_hint": 1.0, "regret": 1.0, "attempts": 2}


def test_regret_is_written_versioned_and_an_unversioned_table_still_reads(tmp_path: Path) -> None:
    path = write_regret(tmp_path / "regret.json", {"t2": ROW, "t1": ROW})
    doc = json.loads(path.read_text())
    assert doc["version"] == REGRET_VERSION and list(doc["tasks"]) == ["t1", "t2"]
    assert read_regret(path) == {"t1": ROW, "t2": ROW}
    path.write_text(json.dumps({"t1": ROW}))  # written before regret.json had a version
    assert read_regret(path) == {"t1": ROW}
    assert read_regret(tmp_path / "none.json") == {}


def test_newer_or_malformed_run_files_are_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "regret.json"
    path.write_text(json.dumps({"version": REGRET_VERSION + 1, "tasks": {}}))
    with pytest.raises(RunFileError, match="newer than this harnessevolve reads") as caught:
        read_regret(path)
    assert caught.value.file == str(path) and caught.value.field == "version"
    path.write_text("[1]")
    with pytest.raises(RunFileError, match="expected a JSON object"):
        read_json_file(path, 1, "candidate file")
    path.write_text("{oops")
    with pytest.raises(RunFileError, match="cannot read the candidate file"):
        read_json_file(path, 1, "candidate file")
    with pytest.raises(RunFileError, match="invalid gate report version"):
        check_version({"version": "2"}, 1, path, "gate report")


def test_the_lock_carries_its_version(tmp_path: Path) -> None:
    lock = HarnessLock(tmp_path)
    lock.acquire("r1")
    try:
        owner = json.loads(lock.path.read_text())
    finally:
        lock.release()
    assert owner["version"] == LOCK_VERSION and owner["run_id"] == "r1"
