"""`refs import --from-atif`: validated, task must exist, nothing written unless every file is good."""

from __future__ import annotations

import json
from pathlib import Path

from suite_files import answer_task, write_suite

from harnessevolve.cli.app import app
from harnessevolve.core import atif
from harnessevolve.core.paths import builtin_dir

REFERENCE = builtin_dir("trajectories") / "shell-basics" / "lookup-key-01.json"


def copy_with(tmp_path: Path, name: str, **extra) -> Path:
    doc = json.loads(REFERENCE.read_text())
    doc["extra"].update(extra)
    for key, value in extra.items():
        if value is None:
            del doc["extra"][key]
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_import_from_atif_writes_one_reference_per_task(cli, tmp_path: Path) -> None:
    source = copy_with(tmp_path, "mine.json", task_id="lookup-key-02")
    out = tmp_path / "refs"
    result = cli.invoke(
        app, ["refs", "import", "-b", "shell-basics", "--from-atif", str(source), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert [p.name for p in out.iterdir()] == ["lookup-key-02.json"]
    written = atif.load(out / "lookup-key-02.json")
    assert written.task_id == "lookup-key-02" and written.extra["reference"] == "imported-atif"
    assert written.steps == atif.load(REFERENCE).steps


def test_unknown_task_or_invalid_file_is_one_line_exit_2_and_writes_nothing(cli, tmp_path: Path) -> None:
    good = copy_with(tmp_path, "good.json")
    unknown = copy_with(tmp_path, "unknown.json", task_id="no-such-task")
    missing = copy_with(tmp_path, "missing.json", task_id=None)
    invalid = tmp_path / "invalid.json"
    invalid.write_text(
        json.dumps({**json.loads(REFERENCE.read_text()), "steps": [{"step_id": 1, "source": "x"}]})
    )
    out = tmp_path / "refs"
    cases = [
        (unknown, "extra.task_id: reference for unknown task 'no-such-task'"),
        (missing, "extra.task_id: no extra.task_id"),
        (invalid, "steps[0]"),
    ]
    for bad, message in cases:
        args = ["refs", "import", "-b", "shell-basics", "--from-atif", str(good), "--from-atif", str(bad)]
        result = cli.invoke(app, [*args, "--out", str(out)])
        assert result.exit_code == 2, result.output
        assert result.output.splitlines()[0].startswith(f"Error: {bad}: "), result.output
        assert message in result.output
        assert not out.exists()


def test_import_lists_the_tasks_it_skipped_and_why(cli, tmp_path: Path) -> None:
    gold = [{"tool": "submit", "arguments": {"answer": "hi"}}]
    suite = write_suite(
        tmp_path / "suite",
        "skip-probe",
        answer_task("with-gold", "Answer hi.", "hi", gold=gold),
        answer_task("no-gold", "Answer hi.", "hi"),
    )
    out = tmp_path / "refs"
    result = cli.invoke(app, ["refs", "import", "-b", str(suite), "--split", "all", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert [p.name for p in out.iterdir()] == ["with-gold.json"]
    assert "skipped 1 task(s) with no gold solution to replay: no-gold" in result.output
    assert "refs generate" in result.output


def test_import_replays_gold_of_tasks_with_judge_checks_and_records_the_skipped_judge(
    cli, scripts, tmp_path: Path
) -> None:
    """A gold replay has no conversation to judge: the judge is not called, the note is printed and
    kept in the reference; the other checks still decide."""
    judge_calls: list[object] = []
    judge = scripts("judge-never-asked", lambda m, t: judge_calls.append(m) or '{"holds": false}')
    said = {"type": "judge", "model": judge, "assertion": "The agent greeted the user."}
    gold = [{"tool": "submit", "arguments": {"answer": "hi"}}]
    mixed = answer_task("mixed", "Say hi.", "hi", gold=gold)
    mixed["checker"].append(said)
    only = answer_task("only-judge", "Greet me.", "x", gold=gold, checker=[said])
    wrong = answer_task("wrong-gold", "Say bye.", "bye", gold=gold)
    wrong["checker"].append(said)
    suite = write_suite(tmp_path / "suite", "judged", mixed, only)
    out = tmp_path / "refs"
    result = cli.invoke(app, ["refs", "import", "-b", str(suite), "--split", "all", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote 2 reference trajectories" in result.output
    assert "judge checks not run for 2 task(s): mixed, only-judge" in " ".join(result.output.split())
    assert not judge_calls
    reference = atif.load(out / "mixed.json")
    assert reference.extra["unjudged"] == [
        {"index": 1, "assertion": "The agent greeted the user.", "model": judge}
    ]
    assert "no conversation to judge" in reference.extra["notes"][-1]
    # the other checks still decide: a wrong gold answer stops the import
    broken = write_suite(tmp_path / "broken", "judged-broken", wrong)
    result = cli.invoke(app, ["refs", "import", "-b", str(broken), "--split", "all", "--out", str(out)])
    assert result.exit_code == 2 and "fails its checker" in result.output
