"""Headroom: a run that ends with no net change says what its evidence shows (room for sampling,
failures within reach by cause, every lever tried and its fate, what to try next), in ``run``'s
summary, ``report`` and their JSON; a run that gained shows none."""

from __future__ import annotations

import json
from pathlib import Path

from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.report.headroom import headroom, headroom_lines, wanted
from harnessevolve.runs import events as ev
from harnessevolve.runs.event_record import ClusterSummary


def test_a_run_with_no_net_change_prints_its_headroom(cli, harness_dir: Path) -> None:
    """The shipped dry-run agent that gives up: every batch run fails, nothing helps it."""
    done = cli.invoke(app, run_args(harness_dir, "scripted/policy:gives_up", generations=1, batch_size=4))
    assert done.exit_code == 1, done.output  # no net change
    text = done.output
    section = text[text.index("headroom (what the evidence says could still help):") :]
    assert "room for sampling: not measured" in section
    assert "failures: 4 of 4 batch runs failed" in section
    assert "with a reference to diverge from" in section  # shell-basics ships references
    assert "levers tried:" in section and "gen 1 " in section
    assert "next: only offline proposers ran" in section  # from run_started.options: no optimizer model
    assert "next: the agent failed 4 of 4 batch runs" in section
    report = cli.invoke(app, ["report", "-H", str(harness_dir), "--json"])
    doc = json.loads(report.stdout)
    assert doc["headroom"]["failed_runs"] == 4 and doc["headroom"]["causes"]
    shown = cli.invoke(app, ["report", "-H", str(harness_dir)])
    assert "headroom (what the evidence says could still help):" in shown.output


def _events(*, changed: bool, delta: float | None, control: dict | None = None) -> list[ev.Event]:
    cluster = ClusterSummary(
        cause="wrong_argument",
        size=2,
        severity=1.0,
        fix_direction="copy values from observations",
        tasks=["a", "b"],
        divergences=[{"task": "a", "step": 1, "reference_step": 1}],
    )
    out: list[ev.Event] = [
        ev.Baseline(split="validation", rev="r0", harness_hash="h0", score=0.25, tasks=8),
        ev.BatchEvaluated(
            generation=1, harness_hash="h0", tasks=["a", "b", "c"], score=0.3, failed=2, clusters=[cluster]
        ),
        ev.CandidateProposed(generation=1, candidate=1, proposer="rules", summary="add a rule"),
        ev.CandidateRejected(
            generation=1,
            candidate=1,
            of=1,
            file="f",
            gate="performance",
            reason="tie on the batch (0 wins, 0 losses)",
        ),
        ev.NoProposal(generation=2, proposer="demo"),
        ev.RunFinished(
            rev="r0",
            accepted=[],
            reverted=[],
            net_change={"changed": changed, "delta": delta, "validation_final": 0.25},
        ),
    ]
    if control is not None:
        out.append(
            ev.TestEvaluated(tasks=10, revisions={}, scores={"seed": 0.2, "evolved": 0.2}, control=control)
        )
    return out


def test_headroom_reads_the_ledger_and_says_what_to_try_next() -> None:
    events = _events(changed=False, delta=None, control={"k": 4, "sc": 0.2, "oracle": 0.5})
    assert wanted(events)
    room = headroom(events)
    assert room.oracle == {"k": 4, "seed": 0.2, "sc": 0.2, "oracle": 0.5}
    assert [(c.cause, c.failed, c.with_reference) for c in room.causes] == [("wrong_argument", 2, 1)]
    assert [(lever.proposer, lever.fate) for lever in room.levers] == [
        ("rules", "refused by performance: tie on the batch (0 wins, 0 losses)")
    ]
    assert room.idle_proposers == {"demo": 1}
    advice = " | ".join(room.advice)
    assert (
        "sampling has room: the seed passes 50% of test tasks in one of 4 tries against 20% in one" in advice
    )
    assert "every edit was refused as a tie" in advice
    assert room.model_proposers is None and "only offline" not in advice  # no run_started: not claimed
    lines = headroom_lines(room)
    assert lines[0].startswith("room for sampling (report --final's control, test): seed 20.0%")
    assert (
        "  wrong_argument: 2 task(s), 1 with a reference to diverge from (fix direction: copy values"
        in lines[2]
    )


def test_no_room_for_sampling_and_a_real_gain_are_told_apart() -> None:
    flat = headroom(_events(changed=False, delta=None, control={"k": 4, "sc": 0.2, "oracle": 0.2}))
    assert any(a.startswith("no room for sampling") for a in flat.advice)
    assert wanted(_events(changed=True, delta=0.02))  # a small change: still shown
    assert not wanted(_events(changed=True, delta=0.25))  # a real gain: not shown
    assert not wanted(_events(changed=False, delta=None)[:-1])  # a run still going: not shown
