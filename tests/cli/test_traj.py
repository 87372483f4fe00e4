"""`traj validate|show|convert` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from harnessevolve.cli.app import app
from harnessevolve.core import atif
from harnessevolve.core.paths import builtin_dir

REFERENCE = builtin_dir("trajectories") / "shell-basics" / "replace-word-01.json"


def broken(tmp_path: Path, name: str, change) -> Path:
    doc = json.loads(REFERENCE.read_text())
    change(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_validate_accepts_every_built_in_reference(cli) -> None:
    files = sorted(str(p) for p in (builtin_dir("trajectories") / "shell-onecall").glob("*.json"))
    result = cli.invoke(app, ["traj", "validate", *files])
    assert result.exit_code == 0, result.output
    assert result.output.count("ok: ") == len(files) == 32


def test_validate_names_the_file_the_step_and_the_field(cli, tmp_path: Path) -> None:
    bad_source = broken(tmp_path, "x.json", lambda d: d["steps"][2].update(source="robot"))
    bad_call = broken(tmp_path, "y.json", lambda d: d["steps"][3]["tool_calls"][0].pop("function_name"))
    result = cli.invoke(app, ["traj", "validate", str(REFERENCE), str(bad_source), str(bad_call)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("invalid:")]
    assert lines == [
        f"invalid: {bad_source}: steps[2].source: 'robot' is not one of ['system', 'user', 'agent']",
        f"invalid: {bad_call}: steps[3].tool_calls[0].function_name: required key 'function_name' is missing",
    ]
    assert "ok: " in result.output  # the valid file is still reported


def test_validate_reports_unreadable_json_and_semantic_rules(cli, tmp_path: Path) -> None:
    truncated = tmp_path / "t.json"
    truncated.write_text(REFERENCE.read_text()[:200])
    stray = broken(
        tmp_path, "s.json", lambda d: d["steps"][2]["observation"]["results"][0].update(source_call_id="zz")
    )
    result = cli.invoke(app, ["traj", "validate", str(truncated), str(stray)])
    assert result.exit_code == 2
    assert f"{truncated}: line " in result.output
    assert f"{stray}: steps[2].observation.results[0].source_call_id: " in result.output


def test_show_renders_steps_calls_observations_and_errors(cli, tmp_path: Path) -> None:
    def fail_step(doc):
        doc["steps"][2]["extra"] = {"error": "tool_error: exit code 1"}
        doc["steps"][2]["observation"]["results"][0]["content"] = "x" * 500

    path = broken(tmp_path, "run.json", fail_step)
    result = cli.invoke(app, ["traj", "show", str(path), "--width", "40"])
    assert result.exit_code == 0, result.output
    for text in (
        "replace-word-01",
        "system",
        "user",
        "agent",
        "sed -i",
        "read_file",
        "submit",
        "error: tool_error: exit code 1",
        "(+460 chars)",
    ):
        assert text in result.output, text


def test_convert_round_trips_through_openai_messages(cli, tmp_path: Path) -> None:
    chat, back = tmp_path / "chat.json", tmp_path / "back.json"
    result = cli.invoke(app, ["traj", "convert", str(REFERENCE), "--to", "openai", "--out", str(chat)])
    assert result.exit_code == 0, result.output
    messages = json.loads(chat.read_text())["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"])["command"].startswith("sed -i")
    result = cli.invoke(
        app,
        ["traj", "convert", str(chat), "--to", "atif", "--out", str(back), "--task-id", "replace-word-01"],
    )
    assert result.exit_code == 0, result.output
    original, converted = atif.load(REFERENCE), atif.load(back)
    assert converted.task_id == "replace-word-01"
    assert [(s.source, s.message, s.tool_calls, s.observations) for s in converted.steps] == [
        (s.source, s.message, s.tool_calls, s.observations) for s in original.steps
    ]


def test_convert_refuses_bad_input_and_writes_nothing(cli, tmp_path: Path) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "tool", "tool_call_id": "nope", "content": "x"}]))
    out = tmp_path / "out.json"
    result = cli.invoke(app, ["traj", "convert", str(chat), "--to", "atif", "--out", str(out)])
    assert result.exit_code == 2
    assert f"{chat}: messages[0].tool_call_id: " in result.output
    assert not out.exists()
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    result = cli.invoke(app, ["traj", "convert", str(other), "--to", "openai", "--out", str(out)])
    assert result.exit_code == 2 and "neither ATIF" in result.output
    assert not out.exists()
