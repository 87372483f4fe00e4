"""Fuzz: files the tool reads after a run or beside one -- trajectories, ledgers -- and output
paths. Every reader is total: any bytes, a folder, deep nesting, wrong types give exit 2 and one
line naming the file (and field), a hint, nothing written; a batch goes on past a bad file."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from refusal import refused, snapshot  # noqa: E402

from harnessevolve.cli.app import app  # noqa: E402
from harnessevolve.core.paths import builtin_dir  # noqa: E402

REFERENCE = builtin_dir("trajectories") / "shell-basics" / "count-lines-01.json"


def doc_with(change: Callable[[dict], None]) -> bytes:
    doc = json.loads(REFERENCE.read_text())
    change(doc)
    return json.dumps(doc).encode()


TRAJECTORY_CASES: list[tuple[str, bytes | None, str | None]] = [
    ("not-utf8", b'{"schema_version": "ATIF-v1.4", "session_id": "\xff\xfe", "steps": []}', None),
    ("deep-nesting", b"[" * 100_000 + b"]" * 100_000, None),
    ("deep-nesting-in-extra", doc_with(lambda d: d.update(extra=json.loads("[" * 900 + "]" * 900))), "extra"),
    ("a-folder", None, None),
    ("empty", b"", "line 1"),
    ("not-json", b"steps: [1, 2]\n", "line 1"),
    ("truncated", REFERENCE.read_bytes()[:200], "line"),
    ("json-but-a-number", b"42", None),
    ("future-version", doc_with(lambda d: d.update(schema_version="ATIF-v1.99")), "schema_version"),
    ("major-version", doc_with(lambda d: d.update(schema_version="ATIF-v2.0")), "schema_version"),
    ("task-id-not-a-string", doc_with(lambda d: d["extra"].update(task_id=5)), "extra.task_id"),
    ("answer-a-list", doc_with(lambda d: d["extra"].update(answer=[1])), "extra.answer"),
    ("step-error-an-object", doc_with(lambda d: d["steps"][2].setdefault("extra", {}).update(error={"x": 1})),
     "steps[2].extra.error"),
    ("steps-not-a-list", doc_with(lambda d: d.update(steps={"1": 2})), "steps"),
    ("nan-metric", doc_with(lambda d: d.update(final_metrics={"total_cost_usd": float("nan")})),
     "final_metrics.total_cost_usd"),
    ("infinite-metric", doc_with(lambda d: d.update(final_metrics={"total_steps": float("inf")})),
     "final_metrics.total_steps"),
    ("step-ids-out-of-order", doc_with(lambda d: d["steps"][1].update(step_id=7)), "steps[1].step_id"),
]  # fmt: skip


def write_case(tmp_path: Path, content: bytes | None) -> Path:
    path = tmp_path / "case.json"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    return path


CASE_ARGS = [c[1:] for c in TRAJECTORY_CASES]
CASE_IDS = [c[0] for c in TRAJECTORY_CASES]


@pytest.mark.parametrize(("content", "field"), CASE_ARGS, ids=CASE_IDS)
def test_traj_validate(tmp_path: Path, content: bytes | None, field: str | None) -> None:
    path = write_case(tmp_path, content)
    refused(tmp_path, ["traj", "validate", str(path)], file="case.json", field=field, line_prefix="invalid:")


@pytest.mark.parametrize(("content", "field"), CASE_ARGS, ids=CASE_IDS)
def test_traj_show_convert_and_diff(tmp_path: Path, content: bytes | None, field: str | None) -> None:
    path = write_case(tmp_path, content)
    refused(tmp_path, ["traj", "show", str(path)], file="case.json", field=field)
    out = tmp_path / "out.json"
    refused(
        tmp_path,
        ["traj", "convert", str(path), "--to", "openai", "--out", str(out)],
        file="case.json",
        field=field,
    )
    refused(tmp_path, ["diff", str(path), str(REFERENCE)], file="case.json", field=field)
    refused(tmp_path, ["diff", str(REFERENCE), str(path)], file="case.json", field=field)


def test_refs_import_from_atif_refuses_a_bad_file(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(builtin_dir("benchmarks") / "shell-basics", bench)
    good = tmp_path / "good.json"
    good.write_bytes(REFERENCE.read_bytes())
    bad = write_case(tmp_path, b"\xff\xfe")
    args = ["refs", "import", "-b", str(bench), "--from-atif", str(good), "--from-atif", str(bad)]
    refused(tmp_path, args, file="case.json", field=None)


def test_a_batch_goes_on_past_bad_files(tmp_path: Path) -> None:
    folder = write_case(tmp_path, None)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\x00\xff" * 100)
    result = CliRunner().invoke(
        app, ["traj", "validate", str(REFERENCE), str(folder), str(binary), str(REFERENCE)]
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.output.count("ok: ") == 2
    assert sum(line.startswith("invalid:") for line in result.output.splitlines()) == 2


# --- ledgers -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A real one-generation run (scripted policy, no model): its harness, with one run folder."""
    harness = tmp_path_factory.mktemp("ledger") / "harness"
    runner = CliRunner()
    assert runner.invoke(app, ["init", str(harness)]).exit_code == 0
    args = ["run", "-H", str(harness), "-b", "shell-basics", "-n", "1", "--batch-size", "4"]
    result = runner.invoke(app, [*args, "--model", "scripted/policy:learner", "--unsafe-no-sandbox"])
    assert result.exit_code in (0, 1), result.output
    return harness


def with_ledger(
    finished_run: Path, tmp_path: Path, change: Callable[[list[bytes]], list[bytes]] | None
) -> Path:
    harness = tmp_path / "harness"
    shutil.copytree(finished_run, harness, symlinks=True)
    (run,) = (harness / ".harnessevolve" / "runs").iterdir()
    ledger = run / "ledger.jsonl"
    if change is None:
        ledger.unlink()
        ledger.mkdir()
    else:
        lines = ledger.read_bytes().splitlines(keepends=True)
        ledger.write_bytes(b"".join(change(lines)))
    return run


def insert_at(index: int, raw: bytes) -> Callable[[list[bytes]], list[bytes]]:
    return lambda lines: lines[:index] + [raw] + lines[index:]


LEDGER_CASES: list[tuple[str, Callable[[list[bytes]], list[bytes]] | None, str]] = [
    ("line-a-list", insert_at(1, b"[1, 2]\n"), "ledger.jsonl:2"),
    ("line-a-number", insert_at(2, b"7\n"), "ledger.jsonl:3"),
    ("line-not-utf8", insert_at(1, b'{"v": 2, "event": "\xff\xfe"}\n'), "ledger.jsonl:2"),
    ("line-garbage", insert_at(1, b"}}}{{{\n"), "ledger.jsonl:2"),
    ("line-from-the-future", insert_at(1, b'{"v": 99, "event": "run_started"}\n'), "ledger.jsonl:2"),
    ("line-without-event", insert_at(1, b'{"v": 2, "ts": "x"}\n'), "ledger.jsonl:2"),
]


@pytest.mark.parametrize("command", ["status", "log", "report"])
@pytest.mark.parametrize(("change", "file"), [c[1:] for c in LEDGER_CASES], ids=[c[0] for c in LEDGER_CASES])
def test_bad_ledger(finished_run: Path, tmp_path: Path, command: str, change, file: str) -> None:
    run = with_ledger(finished_run, tmp_path, change)
    refused(tmp_path, [command, str(run)], file=file, field=None)


def test_resume_refuses_a_bad_ledger(finished_run: Path, tmp_path: Path) -> None:
    run = with_ledger(finished_run, tmp_path, insert_at(1, b"[1, 2]\n"))
    args = ["run", "-H", str(run.parent.parent.parent), "--resume", str(run)]
    refused(tmp_path, args, file="ledger.jsonl:2", field=None)


def test_a_ledger_torn_inside_a_multibyte_character_still_reads(finished_run: Path, tmp_path: Path) -> None:
    torn = '{"v": 2, "event": "generation_started", "note": "caf\u00e9'.encode()[:-1]  # cut inside 'é'
    run = with_ledger(finished_run, tmp_path, lambda lines: [*lines, torn])
    for command in ("status", "log", "report"):
        result = CliRunner().invoke(app, [command, str(run)])
        assert result.exit_code == 0, result.output


def test_resume_of_another_harness_run_is_refused_naming_both(finished_run: Path, tmp_path: Path) -> None:
    run = with_ledger(finished_run, tmp_path, lambda lines: [x for x in lines if b'"run_finished"' not in x])
    other = tmp_path / "other"
    assert CliRunner().invoke(app, ["init", str(other)]).exit_code == 0
    result = refused(
        tmp_path, ["run", "-H", str(other), "--resume", str(run)], file=run.name, field="--resume"
    )
    assert str(run.parent.parent.parent) in result.error_line and str(other) in result.error_line


# --- output paths --------------------------------------------------------------------------------


def test_output_paths_are_checked_before_any_work(finished_run: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me\n")
    a_folder = tmp_path / "a-folder"
    a_folder.mkdir()
    run = with_ledger(finished_run, tmp_path, lambda lines: lines)
    harness = run.parent.parent.parent
    before = snapshot(harness)
    convert = ["traj", "convert", str(REFERENCE), "--to", "openai", "--out"]
    refused(tmp_path, [*convert, str(a_folder)], file="a-folder", field="--out")
    refused(tmp_path, [*convert, str(a_file / "x.json")], file="a-file", field="--out")
    refused(tmp_path, ["report", str(run), "--html", str(a_file / "r.html")], file="a-file", field="--html")
    refused(tmp_path, ["init", str(a_file)], file="a-file", field="DIRECTORY")
    refused(tmp_path, ["init", str(a_file / "h")], file="a-file", field="DIRECTORY")
    gate = ["gate", "-H", str(harness), "-b", "shell-basics", "--model", "scripted/policy:learner"]
    refused(tmp_path, [*gate, "--junit", str(a_folder)], file="a-folder", field="--junit")
    refused(tmp_path, [*gate, "--markdown", str(a_file / "x.md")], file="a-file", field="--markdown")
    assert snapshot(harness) == before
