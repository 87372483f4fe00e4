"""Did the edit fire? An accepted edit is judged on the trajectories after it: its targeted divergent
step gone or changed, or the pattern it added (a rule's command, a demonstration's call) reused more
than before. One that never shows is labelled. Shown on a shell suite and on a tool-call suite."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.signals import Cause, ErrorSignal
from harnessevolve.harness.model import FINAL_SUBMIT_ASK
from harnessevolve.judging.edit_firing import (
    FiringWatch,
    added_text,
    loop_settings_turned_on,
    markers_of,
    trailers,
)
from harnessevolve.report.firing import firing_summary, firings

Call = tuple[str, dict[str, Any]]


def traj(task_id: str, *calls: Call, answer: str | None = None) -> Trajectory:
    steps = [Step(1, "system", "s"), Step(2, "user", "u")]
    for name, args in calls:
        call = ToolCall(f"c{len(steps)}", name, args)
        steps.append(
            Step(
                len(steps) + 1,
                "agent",
                "",
                tool_calls=(call,),
                observations=(ObservationResult(call.tool_call_id, "x"),),
            )
        )
    extra: dict[str, Any] = {"task_id": task_id}
    if answer is not None:
        extra["answer"] = answer
    return Trajectory("s", "a", "0", "m", tuple(steps), extra=extra)


def signal(task_id: str, cause: Cause, actual: Call) -> ErrorSignal:
    return ErrorSignal(task_id, cause, 0.5, "", 3, actual={"tool": actual[0], "arguments": actual[1]})


PROMPT = "You are an agent.\n\n## Rules\n"


def test_a_rule_whose_command_is_used_afterwards_fired() -> None:
    """Shell suite: the rule names `submit` with the command; later runs submit their command."""
    rule = PROMPT + "- After running the command, call `submit` with the command itself, not its output.\n"
    ls: Call = ("bash", {"command": "ls"})
    before = [traj("t1", ls, ("submit", {"answer": "a.txt b.txt"}), answer="a.txt b.txt"), traj("t2", ls)]
    watch = FiringWatch()
    watch.watch(
        sha="a" * 40,
        generation=1,
        summary="rule",
        before={"prompts/system.md": PROMPT},
        changes={"prompts/system.md": rule},
        target_tasks=["t2"],
        signals=[signal("t2", Cause.STEP_LIMIT, ls)],
        made_from=before,
    )
    assert watch.observe(1, [("t3", False, None, traj("t3", ls))]) == []  # its own generation: not later
    after = traj("t3", ls, ("submit", {"answer": "ls"}), answer="ls")
    (event,) = watch.observe(2, [("t3", False, None, after), ("t4", False, None, after)])
    assert event.fired and event.observed_generation == 2 and event.marker_runs == 2
    assert "added pattern used in 2 of 2 later runs (before the edit: 50%)" in event.evidence[0]
    assert watch.never_fired() == []
    assert trailers(event).startswith("Fired: yes (generation 2)\nFired-Evidence: added pattern")


def test_a_targeted_step_that_changed_fired_and_an_edit_that_never_shows_is_labelled() -> None:
    """Tool-call suite (BFCL-like): no pattern in the edit; the targeted task's divergence changed."""
    cd: Call = ("cd", {"folder": "document"})
    watch = FiringWatch()
    common = {"before": {"p.md": "x\n"}, "made_from": [traj("m1", cd)], "summary": "e"}
    edits = [  # (sha, the line the edit adds, its target task and cause)
        ("b", "Move into the folder before acting on its files.", "m1", Cause.WRONG_ARGUMENT),
        ("c", "Use `mkdir` for new folders.", "m2", Cause.WRONG_TOOL),
    ]
    for sha, line, task, cause in edits:
        watch.watch(
            sha=sha * 40,
            generation=1,
            changes={"p.md": f"x\n{line}\n"},
            target_tasks=[task],
            signals=[signal(task, cause, cd)],
            **common,
        )
    unchanged = signal("m2", Cause.WRONG_TOOL, cd)
    moved = signal("m1", Cause.WRONG_ARGUMENT, ("mv", {"source": "a", "destination": "b"}))
    rows = [("m1", False, moved, traj("m1", cd)), ("m2", False, unchanged, traj("m2", cd))]
    (event,) = watch.observe(2, rows)
    assert event.sha == "b" * 40 and event.changed == 1 and event.fired
    (never,) = watch.never_fired()
    assert never.sha == "c" * 40 and not never.fired and never.runs == 2 and never.unchanged == 1
    assert "targeted step unchanged on m2" in never.evidence
    labels = {f.sha[:1]: f.label for f in firings([event, never])}
    assert labels == {"b": "fired (gen 2)", "c": "never fired"}
    assert firing_summary([event, never], 2) == "1 of 2 accepted edit(s) fired; never fired: cccccccc"


def test_a_loop_setting_that_acted_in_later_runs_fired() -> None:
    """A loop edit adds no pattern the agent would use: it fired when the loop did what the setting
    is for (here the last ask to submit, kept on the step as ``extra.nudge``), and a setting that
    never acted stays unfired, its runs counted."""
    ls: Call = ("bash", {"command": "ls"})
    yaml_before = "version: 1\nname: h\nloop:\n  max_steps: 4\n"
    edits = {"e": "  final_submit: true\n", "f": "  stop_on_repeat: 3\n"}
    watch = FiringWatch()
    for sha, line in edits.items():
        watch.watch(
            sha=sha * 40,
            generation=1,
            summary=sha,
            before={"harness.yaml": yaml_before},
            changes={"harness.yaml": yaml_before + line},
            target_tasks=[],
            signals=[],
            made_from=[traj("t1", ls)],
        )
    asked = traj("t2", ls)
    last = asked.steps[-1]
    asked = replace(asked, steps=(*asked.steps[:-1], replace(last, extra={"nudge": FINAL_SUBMIT_ASK})))
    (event,) = watch.observe(2, [("t2", False, None, asked), ("t3", False, None, traj("t3", ls))])
    assert event.sha == "e" * 40 and event.fired
    assert "loop setting final_submit acted in 1 of 2 later runs" in event.evidence
    (never,) = watch.never_fired()
    assert (
        never.sha == "f" * 40 and "loop setting stop_on_repeat acted in 0 of 2 later runs" in never.evidence
    )
    assert loop_settings_turned_on({"harness.yaml": yaml_before}, {"harness.yaml": ": bad ["}) == ()
    assert loop_settings_turned_on({}, {"harness.yaml": "loop:\n  answer_from: bash.command\n"}) == (
        "answer_from",
    )
    checked = "loop:\n  answer_check: bash.command\n"
    assert loop_settings_turned_on({}, {"harness.yaml": checked}) == ("answer_check",)


def test_an_edit_with_nothing_after_it_is_not_observed() -> None:
    watch = FiringWatch()
    watch.watch(
        sha="d" * 40,
        generation=3,
        summary="last",
        before={},
        changes={"p.md": "`x y z`"},
        target_tasks=[],
        signals=[],
        made_from=[],
    )
    (event,) = watch.never_fired()
    assert event.runs == 0 and event.evidence == ["no later trajectory ran with this edit"]
    assert firings([event])[0].label == "not observed"


def test_markers_are_what_the_edit_added() -> None:
    before = {"e.md": '## Example\nbash {"command": "ls"}\n'}
    after = {"e.md": before["e.md"] + 'bash {"command": "find . -name \'*.md\'"}\nUse `wc -l` to count.\n'}
    text = added_text(before, after)
    assert "ls" not in markers_of(text)
    assert markers_of(text) == ("wc -l", "find . -name '*.md'")


def test_a_run_records_whether_its_edits_fired(cli, harness_dir) -> None:  # noqa: ANN001 - fixtures
    """Through the CLI: the ledger's edit_fired, status's fired line and the commit's git note."""
    import json as _json

    from harnessevolve.cli.app import app
    from harnessevolve.harness.git import HarnessRepo

    args = ["run", "-H", str(harness_dir), "-b", "shell-basics", "--batch-size", "8", "-n", "2"]
    result = cli.invoke(app, [*args, "-m", "scripted/policy:learner"])
    assert result.exit_code == 0, result.output
    (run_dir,) = (harness_dir / ".harnessevolve" / "runs").iterdir()
    lines = [_json.loads(x) for x in (run_dir / "ledger.jsonl").read_text().splitlines()]
    accepted = [x["sha"] for x in lines if x["event"] == "candidate_accepted"]
    fired = {x["sha"]: x for x in lines if x["event"] == "edit_fired"}
    assert accepted and set(accepted) == set(fired), (accepted, fired)
    assert all(isinstance(x["fired"], bool) and x["evidence"] for x in fired.values())
    status = cli.invoke(app, ["status", "-H", str(harness_dir)]).output
    assert "accepted edit(s) fired" in status, status
    note = HarnessRepo(harness_dir).note(accepted[0])
    assert note.startswith("Fired: "), note


def test_the_watch_survives_a_kill_in_the_run_folder(tmp_path) -> None:
    """``firing.json``: a resumed process reads the same watch; a generation read before the kill is
    not read again, and an edit whose verdict is in the ledger is not given one again."""
    from harnessevolve.judging.edit_firing import WATCH_FILE, FiringRecorder
    from harnessevolve.runs.events import CandidateCommitted
    from harnessevolve.runs.ledger import Ledger

    rule = PROMPT + "- Call `submit` with the command itself.\n"
    ls: Call = ("bash", {"command": "ls"})

    class NoNotes:
        def add_note(self, _sha: str, _text: str) -> None:
            pass

    class Before:
        files = {"prompts/system.md": PROMPT}

    ledger = Ledger(tmp_path / "ledger.jsonl")
    first = FiringRecorder(ledger, NoNotes(), tmp_path / WATCH_FILE)  # type: ignore[arg-type]
    first.pending(1, Before(), {"prompts/system.md": rule}, "rule", ["t2"], [])  # type: ignore[arg-type]
    ledger.append(CandidateCommitted(generation=1, sha="b" * 40, verdict="accepted"))
    # killed here: after the commit, before the loop bound the watch to its sha
    second = FiringRecorder(ledger, NoNotes(), tmp_path / WATCH_FILE)  # type: ignore[arg-type]
    second.keep(["b" * 40])
    (edit,) = second.watch.edits
    assert edit.sha == "b" * 40 and edit.markers == ("submit",)
    rows = [("t3", False, None, traj("t3", ls, ("submit", {"answer": "ls"}), answer="ls"))]
    assert [e.fired for e in second.watch.observe(2, rows)] == [True]
    assert second.watch.observe(2, rows) == []  # generation 2 is read once
    second.observed(3, [])  # nothing new: the verdict stands
    third = FiringRecorder(ledger, NoNotes(), tmp_path / WATCH_FILE)  # type: ignore[arg-type]
    third.keep(["b" * 40])
    third.finished()  # fired before (the watch says so): no "never fired" verdict
    assert third.watch.never_fired() == []


def test_a_pending_watch_whose_commit_never_came_is_dropped(tmp_path) -> None:
    from harnessevolve.judging.edit_firing import WATCH_FILE, FiringRecorder
    from harnessevolve.runs.ledger import Ledger

    class Before:
        files = {"prompts/system.md": PROMPT}

    ledger = Ledger(tmp_path / "ledger.jsonl")
    first = FiringRecorder(ledger, None, tmp_path / WATCH_FILE)  # type: ignore[arg-type]
    first.pending(1, Before(), {"prompts/system.md": PROMPT + "x\n"}, "x", [], [])  # type: ignore[arg-type]
    second = FiringRecorder(ledger, None, tmp_path / WATCH_FILE)  # type: ignore[arg-type]
    second.keep([])
    assert second.watch.edits == []
