"""A real run's gate reports and candidate files carry their format's version."""

from __future__ import annotations

import json
from pathlib import Path

from harnessevolve.runs.files import CANDIDATE_FILE_VERSION, GATE_REPORT_VERSION


def test_gate_reports_and_candidate_files_are_versioned(
    finished_run: Path, multi_candidate_run: Path
) -> None:
    reports = sorted((finished_run / "gates").glob("*.json"))
    assert reports and all(json.loads(p.read_text())["version"] == GATE_REPORT_VERSION for p in reports)
    candidates = sorted((multi_candidate_run / "candidates").glob("*.json"))
    assert candidates
    assert all(json.loads(p.read_text())["version"] == CANDIDATE_FILE_VERSION for p in candidates)
