"""Reading a ledger: versions checked, older lines migrated, only a torn last line tolerated."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from test_events import SAMPLES
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.core.schema import load_schema
from harnessevolve.runs.ledger import LEDGER_VERSION, Ledger, LedgerError, read_lines
from harnessevolve.runs.ledger_schema import ledger_schema

RUN_STARTED_V1 = {
    "v": 1,
    "ts": "2026-11-30T08:00:00.000+00:00",
    "event": "run_started",
    "run_id": "r1",
    "harness": "/h",
    "rev": "a" * 40,
    "benchmark": "shell-basics",
    "options": {"generations": "2", "model": "None", "max_cost_usd": "None"},
    "resume": {"generations": 2, "model": None, "max_cost_usd": None},
    "gates": None,
}


def run_folder(tmp_path: Path, lines: list[str], *, newline: bool = True) -> Path:
    run_dir = tmp_path / "harness" / ".harnessevolve" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "ledger.jsonl").write_text("\n".join(lines) + ("\n" if newline else ""), encoding="utf-8")
    return run_dir


def line(event: str, **fields: object) -> str:
    return json.dumps({"v": LEDGER_VERSION, "ts": "2026-12-01T08:00:00.000+00:00", "event": event, **fields})


def test_the_shipped_schema_is_the_catalogs() -> None:
    assert load_schema("ledger") == ledger_schema(LEDGER_VERSION)


def test_every_sample_event_as_written_fits_the_schema(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    for name, data in sorted(SAMPLES.items(), key=lambda item: item[0] == "run_finished"):  # it ends a run
        ledger.append(name, **data)
    ledger.close()
    schema = load_schema("ledger")
    for record in read_lines(tmp_path / "ledger.jsonl"):
        jsonschema.validate(record, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"v": 2, "ts": "x", "event": "baseline", "score": 0.5}, schema)


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    run_dir = run_folder(
        tmp_path, [line("generation_started", generation=1, rev="a"), '{"v": 2, "ts"'], newline=False
    )
    assert [e["event"] for e in read_lines(run_dir / "ledger.jsonl")] == ["generation_started"]


def test_an_undecodable_line_before_the_last_is_an_error_naming_it(tmp_path: Path) -> None:
    run_dir = run_folder(
        tmp_path,
        [
            line("generation_started", generation=1, rev="a"),
            "{oops",
            line("no_proposal", generation=1, proposer="d"),
        ],
    )
    with pytest.raises(LedgerError, match="line 2 is not JSON") as caught:
        read_lines(run_dir / "ledger.jsonl")
    assert caught.value.file == f"{run_dir / 'ledger.jsonl'}:2"
    result = CliRunner().invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 2
    assert "ledger.jsonl:2" in result.output and "Traceback" not in result.output


def test_a_line_that_is_not_an_event_is_an_error(tmp_path: Path) -> None:
    run_dir = run_folder(tmp_path, ["[1, 2]", line("no_proposal", generation=1, proposer="d")])
    with pytest.raises(LedgerError, match="line 1 is not a ledger event"):
        read_lines(run_dir / "ledger.jsonl")


def test_a_newer_ledger_is_refused(tmp_path: Path) -> None:
    newer = json.dumps({"v": LEDGER_VERSION + 1, "ts": "x", "event": "run_started"})
    run_dir = run_folder(tmp_path, [newer, line("no_proposal", generation=1, proposer="d")])
    with pytest.raises(LedgerError, match="newer harnessevolve"):
        read_lines(run_dir / "ledger.jsonl")
    result = CliRunner().invoke(app, ["status", str(run_dir)])
    assert result.exit_code == 2 and "newer harnessevolve" in result.output


def test_a_v1_run_started_is_migrated_to_typed_options_stored_once(tmp_path: Path) -> None:
    run_dir = run_folder(tmp_path, [json.dumps(RUN_STARTED_V1)])
    (started,) = read_lines(run_dir / "ledger.jsonl")
    assert started["v"] == LEDGER_VERSION and "resume" not in started
    assert started["options"] == {"generations": 2, "model": None, "max_cost_usd": None}


def test_opening_a_ledger_cuts_a_torn_tail_and_keeps_a_complete_one(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text(line("no_proposal", generation=1, proposer="d") + "\n" + '{"v": 2, "ev', encoding="utf-8")
    Ledger(path).close()
    assert path.read_text(encoding="utf-8").count("\n") == 1
    path.write_text(line("no_proposal", generation=1, proposer="d"), encoding="utf-8")  # no newline
    ledger = Ledger(path)
    ledger.append("no_proposal", generation=2, proposer="d")
    ledger.close()
    assert [e["generation"] for e in read_lines(path)] == [1, 2]


def test_a_torn_multibyte_character_on_the_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(
        (line("no_proposal", generation=1, proposer="d") + "\n").encode() + '{"s": "é'.encode()[:-1]
    )
    assert len(read_lines(path)) == 1
