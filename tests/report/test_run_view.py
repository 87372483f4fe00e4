"""RunView from real scripted runs: candidates, diffs, lineage, state; and from damaged ledgers."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import git
import pytest
from scripted_run import copy_run, dead_pid, ledger_events, write_events, write_lock

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.report.run_usage import fold_usage
from harnessevolve.report.run_view import load_run_view
from harnessevolve.report.runs import resolve_run
from harnessevolve.runs.events import parse_event

FINISHED = {"outcome": "accepted", "rev": "r"}
RUN_END = {"accepted": [], "reverted": [], "rev": "r"}


def test_finished_run_candidates_diffs_and_lineage(finished_run: Path) -> None:
    view = load_run_view(finished_run)
    assert view.state == "finished" and view.run_id == finished_run.name
    assert view.benchmark == "shell-basics" and view.generation == 2 and view.planned_generations == 2
    accepted, reverted = view.candidates
    assert (accepted.outcome, reverted.outcome) == ("accepted", "reverted")
    assert reverted.rejected_by == "performance" and "losses over" in reverted.reason  # pooled
    repo = git.Repo(view.harness_dir)
    assert reverted.revert_sha and repo.commit(reverted.revert_sha).message.startswith(
        "harnessevolve: revert"
    )
    for c in (accepted, reverted):
        assert c.diff_source == "git" and "+## Example" in c.diff and "prompts/examples.md" in c.diff
        assert c.trailers["Run"] == view.run_id and c.trailers["Proposer"] == "demo"
        assert c.targets == ("premature_finish",) and c.verdicts[0].gate == "quality"
    assert [s.kind for s in view.lineage] == ["seed", "accepted"]
    assert view.lineage[1].sha == accepted.sha and view.lineage[0].sha == view.seed_rev
    first, second = view.generations
    assert first.train_current == 0.0 and first.train_candidate > 0 and first.clusters[0].cause
    assert view.best_validation == max(g.validation for g in view.generations) > view.baseline_validation
    assert view.unknown_events == () and view.elapsed_seconds() > 0


def test_never_committed_candidates_show_their_recorded_changes(multi_candidate_run: Path) -> None:
    view = load_run_view(multi_candidate_run)
    rejected = [c for c in view.candidates if c.outcome == "rejected"]
    assert rejected and all(c.sha is None for c in rejected)
    for c in rejected:
        assert c.diff_source == "recorded changes", c
        assert "+## Example" in c.diff and c.diff.startswith("--- ")
    assert len({c.anchor for c in view.candidates}) == len(view.candidates)


def test_run_in_progress_stale_lock_and_incomplete(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path)
    events = ledger_events(run)
    cut = next(i for i, e in enumerate(events) if e["event"] == "candidate_committed")
    write_events(run, events[: cut + 1])
    assert load_run_view(run).state == "incomplete"
    write_lock(run, os.getpid())
    view = load_run_view(run)
    assert view.state == "running" and view.ended_at is None
    assert view.candidates[0].outcome == "pending"
    write_lock(run, dead_pid())
    assert load_run_view(run).state == "stale-lock"


def test_interrupted_and_resumed_states(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path)
    events = ledger_events(run)[:-1]
    stop = {"v": 1, "ts": events[-1]["ts"], "event": "run_interrupted", "generation": 2, "stage": "gate"}
    write_events(run, events + [stop])
    assert load_run_view(run).state == "interrupted"
    write_events(run, events + [stop, {**stop, "event": "run_resumed"}])
    assert load_run_view(run).state == "incomplete"


def test_unknown_events_and_a_torn_line_are_tolerated(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path)
    events = ledger_events(run)
    events.insert(3, {"v": 2, "ts": events[3]["ts"], "event": "brand_new_thing", "payload": {"x": 1}})
    write_events(run, events)
    with (run / "ledger.jsonl").open("a") as handle:
        handle.write('{"v": 1, "event": "generation_sta')
    view = load_run_view(run)
    assert view.unknown_events == ("brand_new_thing",)
    assert view.state == "finished" and len(view.candidates) == 2


def test_without_the_harness_repository_diffs_are_missing_not_fatal(
    finished_run: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "elsewhere" / finished_run.name
    shutil.copytree(finished_run, moved)
    events = ledger_events(moved)
    events[0]["harness"] = str(tmp_path / "gone")
    write_events(moved, events)
    view = load_run_view(moved)
    assert view.git_error and all(c.diff == "" and c.diff_source == "" for c in view.candidates)
    assert [c.outcome for c in view.candidates] == ["accepted", "reverted"]


def test_resolve_run_by_id_prefix_path_and_latest(finished_run: Path) -> None:
    harness = finished_run.parents[2]
    assert resolve_run(None, harness) == finished_run
    assert resolve_run(finished_run.name, harness) == finished_run
    assert resolve_run(finished_run.name[:10], harness) == finished_run
    assert resolve_run(str(finished_run), Path("/nonexistent")) == finished_run
    assert resolve_run(str(finished_run / "ledger.jsonl"), Path("/nonexistent")) == finished_run
    with pytest.raises(HarnessEvolveError, match="no run 'nope'"):
        resolve_run("nope", harness)


def test_usage_plain_per_generation_and_cumulative_snapshots() -> None:
    plain = [
        {
            "event": "generation_finished",
            "generation": 1,
            **FINISHED,
            "usage": {"execute": {"tokens": 10, "cost_usd": 0.5}},
        },
        {
            "event": "generation_finished",
            "generation": 2,
            **FINISHED,
            "usage": {"execute": {"tokens": 5, "cost_usd": 0.25}},
        },
    ]
    usage = fold_usage([parse_event(e) for e in plain])
    assert usage.by_stage == {"execute": {"tokens": 15.0, "cost_usd": 0.75}}
    assert usage.by_generation[2] == {"execute": {"tokens": 5.0, "cost_usd": 0.25}}
    snap = [
        {
            "event": "generation_finished",
            "generation": 1,
            **FINISHED,
            "usage": {"by_stage": {"gate": {"tokens": 10}}},
        },
        {
            "event": "generation_finished",
            "generation": 2,
            **FINISHED,
            "usage": {"by_stage": {"gate": {"tokens": 25}}},
        },
        {
            "event": "run_finished",
            **RUN_END,
            "usage": {"by_stage": {"gate": {"tokens": 30}}, "by_model": {"m": {"tokens": 30}}},
        },
    ]
    usage = fold_usage([parse_event(e) for e in snap])
    assert usage.by_generation == {1: {"gate": {"tokens": 10.0}}, 2: {"gate": {"tokens": 15.0}}}
    assert usage.by_stage == {"gate": {"tokens": 30.0}} and usage.by_model == {"m": {"tokens": 30.0}}
    assert fold_usage([parse_event({"event": "run_finished", **RUN_END, "tokens": 3})]).by_stage == {}


def test_ledger_usage_reaches_the_view(finished_run: Path) -> None:
    finished = ledger_events(finished_run)[-1]
    view = load_run_view(finished_run)
    if "usage" not in finished:
        pytest.skip("this pipeline does not record usage in run_finished yet")
    assert view.usage and all("tokens" in numbers for numbers in view.usage.values())
    assert json.dumps(view.usage)
