"""The optional LLM judge, with the scripted provider: agreement recorded, its cause applied only
where the rules are ambiguous, answers cached, a bad reply leaves the rules' signal; `diff
--judge-model` prints its view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessevolve.cli.app import app
from harnessevolve.core import atif
from harnessevolve.core.signals import BASE_SEVERITY, Cause
from harnessevolve.evaluate.alignment import first_divergence
from harnessevolve.evaluate.signal_judge import JudgeCache, agreement, ambiguous, judge_signal
from harnessevolve.models.scripted import register_script, unregister_script


def trajectory(*calls: tuple[str, dict], tools: bool = True) -> atif.Trajectory:
    steps = [{"step_id": 1, "source": "user", "message": "read a.txt"}]
    for name, args in calls:
        sid = len(steps) + 1
        steps.append(
            {
                "step_id": sid,
                "source": "agent",
                "message": "",
                "tool_calls": [{"tool_call_id": f"c{sid}", "function_name": name, "arguments": args}],
                "observation": {"results": [{"source_call_id": f"c{sid}", "content": "ok"}]},
            }
        )
    steps.append({"step_id": len(steps) + 1, "source": "agent", "message": "Done."})
    agent: dict = {"name": "x", "version": "1"}
    if tools:
        agent["tool_definitions"] = [{"type": "function", "function": {"name": "read"}}]
    version = "ATIF-v1.5" if tools else "ATIF-v1.4"
    return atif.from_dict({"schema_version": version, "session_id": "s", "agent": agent, "steps": steps})


REF = trajectory(("read", {"path": "a.txt"}))


def answer(cause: str, genuine: bool = True) -> str:
    return json.dumps({"cause": cause, "hint": "read a.txt first", "reference_genuine": genuine, "why": "w"})


@pytest.fixture
def judge(request):
    name = f"judge-{request.node.name}"
    yield name
    unregister_script(name)


def test_agreement_is_recorded_and_the_rules_cause_kept(judge: str, tmp_path: Path) -> None:
    script = register_script(judge, [answer("wrong_argument")])
    run = trajectory(("read", {"path": "b.txt"}))
    rules = first_divergence(run, REF)
    judged = judge_signal(rules, run, REF, model=f"scripted/{judge}", cache=JudgeCache(tmp_path))
    assert judged.cause is Cause.WRONG_ARGUMENT and judged.judge["agrees"] is True
    assert judged.judge["reference_genuine"] is True and judged.judge["applied"] is False
    assert agreement([judged]) == 1.0 and script.calls == 1


def test_a_disagreement_on_a_clear_signal_is_reported_not_applied(judge: str, tmp_path: Path) -> None:
    register_script(judge, [answer("wrong_tool", genuine=False)])
    run = trajectory(("read", {"path": "b.txt"}))
    judged = judge_signal(
        first_divergence(run, REF), run, REF, model=f"scripted/{judge}", cache=JudgeCache(tmp_path)
    )
    assert judged.cause is Cause.WRONG_ARGUMENT
    assert judged.judge["agrees"] is False and judged.judge["cause"] == "wrong_tool"
    assert judged.judge["reference_genuine"] is False
    assert agreement([judged]) == 0.0


def test_where_the_rules_are_ambiguous_the_judges_cause_is_applied(judge: str, tmp_path: Path) -> None:
    register_script(judge, [answer("unknown_tool")])
    run, ref = (
        trajectory(("fetch_all", {}), tools=False),
        trajectory(("read", {"path": "a.txt"}), tools=False),
    )
    rules = first_divergence(run, ref)
    assert rules.cause is Cause.WRONG_TOOL and ambiguous(rules)  # no tool definitions: a gap
    judged = judge_signal(rules, run, ref, model=f"scripted/{judge}", cache=JudgeCache(tmp_path))
    assert judged.cause is Cause.UNKNOWN_TOOL and judged.judge["applied"] is True
    assert "read a.txt first" in judged.hint
    assert judged.severity == pytest.approx(
        rules.severity * BASE_SEVERITY[Cause.UNKNOWN_TOOL] / BASE_SEVERITY[Cause.WRONG_TOOL]
    )


def test_answers_are_cached(judge: str, tmp_path: Path) -> None:
    script = register_script(judge, [answer("wrong_argument")])  # one reply only
    run = trajectory(("read", {"path": "b.txt"}))
    signal = first_divergence(run, REF)
    first = judge_signal(signal, run, REF, model=f"scripted/{judge}", cache=JudgeCache(tmp_path))
    again = judge_signal(signal, run, REF, model=f"scripted/{judge}", cache=JudgeCache(tmp_path))
    assert script.calls == 1 and first.judge["cached"] is False and again.judge["cached"] is True
    assert again.judge["cause"] == first.judge["cause"]


@pytest.mark.parametrize("reply", ["no json here", '{"cause": "made_up"}', "[1, 2]"])
def test_a_bad_reply_leaves_the_rules_signal(judge: str, tmp_path: Path, reply: str) -> None:
    register_script(judge, [reply])
    run = trajectory(("read", {"path": "b.txt"}))
    rules = first_divergence(run, REF)
    judged = judge_signal(rules, run, REF, model=f"scripted/{judge}", cache=JudgeCache(tmp_path))
    assert judged.cause is rules.cause and "error" in judged.judge and agreement([judged]) is None


def test_diff_with_a_judge_model_prints_its_view(cli, judge: str, tmp_path: Path) -> None:
    register_script(judge, [answer("wrong_argument")])
    run_path, ref_path = tmp_path / "run.json", tmp_path / "ref.json"
    atif.save(trajectory(("read", {"path": "b.txt"})), run_path)
    atif.save(REF, ref_path)
    args = [
        "diff",
        str(run_path),
        str(ref_path),
        "--judge-model",
        f"scripted/{judge}",
        "--judge-cache",
        str(tmp_path / "c"),
    ]
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (
        f"judge scripted/{judge}: agrees with the rules" in result.output
        and "reference looks genuine" in result.output
    )
    doc = json.loads(cli.invoke(app, [*args, "--json"]).output)  # from the cache: the script is spent
    assert doc["signal"]["judge"]["agrees"] is True and doc["signal"]["judge"]["cached"] is True
    plain = json.loads(cli.invoke(app, ["diff", str(run_path), str(ref_path), "--json"]).output)
    assert "judge" not in plain["signal"]  # off by default


def test_only_a_lone_harmless_extra_call_counts_as_ambiguous() -> None:
    from harnessevolve.core.signals import ErrorSignal

    lone = first_divergence(trajectory(("read", {"path": "x"}), ("read", {"path": "a.txt"})), REF)
    assert lone.cause is Cause.EXTRA_STEP and ambiguous(lone)
    plain = ErrorSignal("t", Cause.EXTRA_STEP, 0.4, "step 2: an unneeded bash(command='rm x') before read()")
    assert not ambiguous(plain)


def test_judge_calls_leave_no_litellm_warning(judge: str, tmp_path: Path, capfd) -> None:
    """Each call runs on an event loop of its own; litellm's state on it is settled (models.quiet)."""
    register_script(judge, [answer("wrong_argument")] * 4)
    for i in range(4):
        run = trajectory(("read", {"path": f"b{i}.txt"}))
        judge_signal(
            first_divergence(run, REF), run, REF, model=f"scripted/{judge}", cache=JudgeCache(tmp_path)
        )
    err = capfd.readouterr().err
    assert "LoggingWorker" not in err and "Task was destroyed" not in err, err
