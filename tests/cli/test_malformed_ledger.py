"""A ledger line of a known event whose fields have the wrong type (a mapping where a list belongs,
a string generation): read-only commands go on without it and say so; ``--resume`` refuses with
exit 2 naming the file, line and event; never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessevolve.cli.app import app
from harnessevolve.runs.ledger import malformed, read_ledger


def corrupt(ledger: Path, changes: dict[str, tuple[str, object]], *, cut_after: str | None = None) -> None:
    """Set ``field`` of the first ``event`` to ``value`` per ``changes``; keep the lines up to the
    first ``cut_after`` event (a run killed there)."""
    out = []
    for line in ledger.read_text().splitlines():
        record = json.loads(line)
        if record["event"] in changes:
            field, value = changes.pop(record["event"])
            record[field] = value
        out.append(json.dumps(record))
        if record["event"] == cut_after:
            break
    ledger.write_text("\n".join(out) + "\n")


@pytest.fixture
def ran(cli, harness_dir: Path) -> Path:
    result = cli.invoke(
        app, ["run", "-H", str(harness_dir), "-b", "shell-basics", "-n", "1", "--batch-size", "2",
              "-m", "scripted/policy:gives_up"],
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    return next((harness_dir / ".harnessevolve" / "runs").glob("*/ledger.jsonl"))


@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["log"], ["report"]])
def test_read_only_commands_go_on_without_a_malformed_line_and_say_so(
    cli, harness_dir: Path, ran: Path, command: list[str]
) -> None:
    corrupt(ran, {"generation_finished": ("generation", "one"), "batch_evaluated": ("clusters", {"a": 1})})
    bad = malformed(read_ledger(ran))
    assert [(e.name, e.line) for e in bad] == [
        ("batch_evaluated", bad[0].line),
        ("generation_finished", bad[1].line),
    ]
    assert "batch_evaluated.clusters must be a list" in bad[0].reason
    result = cli.invoke(app, [*command, "-H", str(harness_dir)])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert f"line {bad[0].line}: fields do not fit" in result.output and "shown without it" in result.output
    assert "generation=one" not in result.output


def test_resume_refuses_a_malformed_known_event(cli, harness_dir: Path, ran: Path) -> None:
    corrupt(ran, {"batch_evaluated": ("generation", [1])}, cut_after="batch_evaluated")
    result = cli.invoke(app, ["run", "-H", str(harness_dir), "--resume", ran.parent.name])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "batch_evaluated" in result.output and "must be int" in result.output
    assert "ledger.jsonl" in result.output
