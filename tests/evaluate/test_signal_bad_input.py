"""Trajectories that lack something: signals are still produced where possible, the gap is named in
the signal, nothing crashes (through the API and through `harnessevolve diff`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harnessevolve.cli.app import app
from harnessevolve.core import atif
from harnessevolve.core.signals import Cause
from harnessevolve.evaluate.alignment import first_divergence, signal_without_reference


def doc(steps: list[dict[str, Any]], tools: list | None = None) -> dict[str, Any]:
    agent: dict[str, Any] = {"name": "other", "version": "1"}
    if tools is not None:
        agent["extra"] = {"tool_definitions": tools}
    return {"schema_version": "ATIF-v1.4", "session_id": "s", "agent": agent, "steps": steps}


def call(
    sid: int, name: str, args: Any, result: str | None = "ok", result_id: str | None = None
) -> dict[str, Any]:
    step: dict[str, Any] = {
        "step_id": sid,
        "source": "agent",
        "message": "",
        "tool_calls": [{"tool_call_id": f"c{sid}", "function_name": name, "arguments": args}],
    }
    if result is not None:
        step["observation"] = {"results": [{"source_call_id": result_id or f"c{sid}", "content": result}]}
    return step


USER = {"step_id": 1, "source": "user", "message": "read a.txt then b.txt"}
DONE = {"step_id": 4, "source": "agent", "message": "Done."}
REF = doc([USER, call(2, "read", {"path": "a.txt"}), call(3, "read", {"path": "b.txt"}), DONE])


def load(d: dict[str, Any]) -> atif.Trajectory:
    return atif.from_dict(d, strict=False)


def test_without_tool_definitions_a_tool_never_seen_is_wrong_tool_and_the_gap_is_named() -> None:
    run = doc([USER, call(2, "read", {"path": "a.txt"}), call(3, "fetch_all", {}), DONE])
    signal = first_divergence(load(run), load(REF))
    assert (signal.cause, signal.step) == (Cause.WRONG_TOOL, 3)
    assert any("no tool definitions" in gap for gap in signal.gaps)


def test_a_call_without_observation_is_compared_and_the_gap_named() -> None:
    run = doc(
        [USER, call(2, "read", {"path": "a.txt"}, result=None), call(3, "read", {"path": "c.txt"}), DONE]
    )
    signal = first_divergence(load(run), load(REF))
    assert (signal.cause, signal.step) == (Cause.WRONG_ARGUMENT, 3)
    assert any("no observation for call c2" in gap for gap in signal.gaps)


def test_an_observation_of_an_unknown_call_is_kept_out_and_named() -> None:
    run = doc(
        [
            USER,
            call(2, "read", {"path": "a.txt"}, result_id="ghost"),
            call(3, "read", {"path": "b.txt"}),
            DONE,
        ]
    )
    signal = first_divergence(load(run), load(REF))
    assert signal.cause is Cause.WRONG_ARGUMENT  # followed the reference; the checker's failure stands
    assert any("unknown call id(s) ghost" in gap for gap in signal.gaps)
    assert any("no observation for call c2" in gap for gap in signal.gaps)


def test_non_json_arguments_are_a_format_error_and_the_text_is_kept() -> None:
    run = doc([USER, call(2, "read", '{"path": "a.txt"'), call(3, "read", {"path": "a.txt"}), DONE])
    trajectory = load(run)
    assert trajectory.steps[1].tool_calls[0].raw_arguments == '{"path": "a.txt"'
    signal = first_divergence(trajectory, load(REF))
    assert (signal.cause, signal.step) == (Cause.FORMAT_ERROR, 2)
    assert signal.actual == {"tool": "read", "arguments": {}, "raw_arguments": '{"path": "a.txt"'}
    assert signal_without_reference(trajectory).cause is Cause.FORMAT_ERROR
    # a JSON string holding an object is just arguments (as OpenAI chat sends them)
    parsed = load(doc([USER, call(2, "read", '{"path": "a.txt"}')]))
    assert parsed.steps[1].tool_calls[0].arguments == {"path": "a.txt"}


def test_a_trajectory_with_no_agent_step_at_all() -> None:
    signal = first_divergence(load(doc([USER])), load(REF))
    assert signal.cause is Cause.PREMATURE_FINISH and signal.reference_step == 2


def test_diff_never_crashes_on_these_and_names_the_gaps(cli, tmp_path: Path) -> None:
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps(REF))
    runs = {
        "nodefs": doc([USER, call(2, "read", {"path": "a.txt"}), call(3, "fetch_all", {}), DONE]),
        "noobs": doc(
            [USER, call(2, "read", {"path": "a.txt"}, result=None), call(3, "read", {"path": "x"}), DONE]
        ),
        "ghost": doc(
            [
                USER,
                call(2, "read", {"path": "a.txt"}, result_id="ghost"),
                call(3, "read", {"path": "b"}),
                DONE,
            ]
        ),
        "nonjson": doc([USER, call(2, "read", "path=a.txt"), call(3, "read", {"path": "a.txt"}), DONE]),
    }
    for name, run in runs.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(run))
        result = cli.invoke(app, ["diff", str(path), str(ref), "--json"])
        assert result.exit_code == 0, (name, result.output)
        signal = json.loads(result.output)["signal"]
        assert signal["cause"] and (signal["gaps"] or name == "nonjson"), (name, signal)
        text = cli.invoke(app, ["diff", str(path), str(ref)])
        assert text.exit_code == 0 and "cause:" in text.output
    assert "gap:" in cli.invoke(app, ["diff", str(tmp_path / "noobs.json"), str(ref)]).output


def test_diff_takes_tool_definitions_from_a_file(cli, tmp_path: Path) -> None:
    ref, run, tools = tmp_path / "ref.json", tmp_path / "run.json", tmp_path / "tools.json"
    ref.write_text(json.dumps(REF))
    run.write_text(
        json.dumps(doc([USER, call(2, "read", {"path": "a.txt"}), call(3, "fetch_all", {}), DONE]))
    )
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "read", "parameters": {}}}]))
    result = cli.invoke(app, ["diff", str(run), str(ref), "--tools", str(tools), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["signal"]["cause"] == "unknown_tool"
    tools.write_text('{"not": "tools"}')
    bad = cli.invoke(app, ["diff", str(run), str(ref), "--tools", str(tools)])
    assert bad.exit_code == 2 and "not a list of tool definitions" in bad.output


def test_a_result_recorded_on_a_later_system_step_is_read_as_the_calls_observation() -> None:
    error = {"source_call_id": "c2", "content": "read: a.txt: No such file or directory"}
    run = doc(
        [
            USER,
            call(2, "read", {"path": "a.txt"}, result=None),
            {
                "step_id": 3,
                "source": "system",
                "message": "tool results",
                "observation": {"results": [error]},
            },
            call(4, "read", {"path": "b.txt"}),
            {"step_id": 5, "source": "agent", "message": "Done."},
        ]
    )
    signal = first_divergence(load(run), load(REF))
    assert (signal.cause, signal.step, signal.reference_step) == (Cause.TOOL_ERROR_IGNORED, 4, 3)
    assert not any("no observation" in gap for gap in signal.gaps)
