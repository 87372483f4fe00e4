"""K concurrent candidates and the T_rev revision loop, through `harnessevolve run`."""

from __future__ import annotations

import asyncio
import collections
import json
from pathlib import Path

import git
import pytest
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.harness.load import load_harness
from harnessevolve.judging.judge import CandidateJudge
from harnessevolve.optimize import registry
from harnessevolve.optimize.proposal import Candidate
from harnessevolve.runs.ledger import read_lines


def ledger_of(harness_dir: Path) -> list[dict]:
    (run,) = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    return read_lines(run / "ledger.jsonl")


def test_k_candidates_are_judged_concurrently_and_only_the_best_is_kept(
    harness_dir: Path, cli, learner, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_flight = {"now": 0, "max": 0}
    screen = CandidateJudge.screen

    async def watched(self, *args, **kwargs):
        in_flight["now"] += 1
        in_flight["max"] = max(in_flight["max"], in_flight["now"])
        await asyncio.sleep(0.05)  # long enough for the other candidates to start
        try:
            return await screen(self, *args, **kwargs)
        finally:
            in_flight["now"] -= 1

    monkeypatch.setattr(CandidateJudge, "screen", watched)
    head = git.Repo(harness_dir).head.commit.hexsha
    result = cli.invoke(app, run_args(harness_dir, learner, "-n", "1", "--candidates", "3"))
    assert result.exit_code == 0, result.output
    assert in_flight["max"] == 3

    events = ledger_of(harness_dir)
    proposed = [e for e in events if e["event"] == "candidate_proposed"]
    assert len(proposed) == 3 and len({e["summary"] for e in proposed}) == 3
    accepted = [e for e in events if e["event"] == "candidate_accepted"]
    rejected = [e for e in events if e["event"] == "candidate_rejected"]
    assert len(accepted) == 1 and len(rejected) == 2 and accepted[0]["of"] == 3
    # Every candidate not kept is on record, with its files, in the run folder.
    run_dir = next((harness_dir / ".harnessevolve" / "runs").iterdir())
    for event in rejected:
        saved = json.loads((run_dir / event["file"]).read_text())
        assert saved["changes"] and saved["summary"] == event["summary"]
    # Exactly one new commit: the winner, with its credit assignment and selection in trailers.
    repo = git.Repo(harness_dir)
    new = list(repo.iter_commits(f"{head}..HEAD"))
    assert len(new) == 1 and new[0].hexsha == accepted[0]["sha"]
    assert "Candidate: " in new[0].message and "of 3" in new[0].message
    assert "Targets: " in new[0].message and "Verdict: accepted" in new[0].message
    assert not repo.is_dirty(untracked_files=True)
    # only a gate's refusal counts against a proposer; passing every gate and being outscored does not
    from harnessevolve.core.tasks import load_benchmark
    from harnessevolve.pipeline.history import proposer_strikes
    from harnessevolve.pipeline.resume import resume_point
    from harnessevolve.runs.ledger import read_ledger

    point = resume_point(
        read_ledger(run_dir / "ledger.jsonl"), load_benchmark("shell-basics"), run_dir.name, 10, 1
    )
    refused = [e["proposer"] for e in rejected if e.get("gate") is not None]
    assert proposer_strikes(point.outcomes) == dict(collections.Counter(refused))


def bloated_examples(harness_dir: Path) -> int:
    """Give the harness two long demonstrations; returns the assembled prompt's length."""
    filler = "## Example\nTask: an old demonstration\n" + "x " * 300 + "\n"
    (harness_dir / "prompts" / "examples.md").write_text(filler + "\n" + filler)
    repo = git.Repo(harness_dir)
    repo.git.add("-A")
    repo.git.commit("-qm", "two long demonstrations")
    return len(load_harness(harness_dir).assembled_prompt())


def test_a_quality_rejection_goes_back_to_the_proposer_and_the_revision_is_recorded(
    tmp_path: Path, harness_dir: Path, cli, learner
) -> None:
    size = bloated_examples(harness_dir)
    gates = tmp_path / "tight.yaml"
    gates.write_text(f"version: 1\nquality:\n  max_prompt_chars: {size + 150}\n")
    result = cli.invoke(
        app, run_args(harness_dir, learner, "-n", "1", "--proposer", "demo", "--gates", str(gates))
    )
    assert result.exit_code in (0, 1), result.output
    events = ledger_of(harness_dir)
    revised = [e for e in events if e["event"] == "candidate_revised"]
    assert len(revised) == 1
    assert revised[0]["reason"].startswith("quality: prompt bloat") and revised[0]["revision"] == 1
    assert "dropping the 1 oldest demonstration" in revised[0]["summary"]
    verdicts = next(e for e in events if e["event"] == "gate_verdicts")
    assert verdicts["summary"] == revised[0]["summary"]
    assert [v["gate"] for v in verdicts["verdicts"]][:2] == ["quality", "leakage"]
    assert verdicts["verdicts"][0]["passed"]


class AlwaysBloated:
    """Proposes, and revises into, edits that are always too long for the quality gate."""

    name = "bloat"

    def edit(self, context, n: int) -> Candidate:
        path = context.system_prompt_path
        text = context.files[path] + "\n" + f"padding {n} " * 5000
        return Candidate({path: text}, f"bloat {n}", "", ("x",), (), self.name)

    async def propose(self, context):
        return self.edit(context, 0)

    async def revise(self, context, candidate, reason):
        return candidate.revised(self.edit(context, candidate.revision + 1), reason)


def test_the_revision_loop_stops_after_t_rev(harness_dir: Path, cli, learner) -> None:
    registry.PROPOSERS["bloat"] = AlwaysBloated
    try:
        result = cli.invoke(
            app, run_args(harness_dir, learner, "-n", "1", "--proposer", "bloat", "--max-revisions", "2")
        )
    finally:
        del registry.PROPOSERS["bloat"]
    assert result.exit_code == 1, result.output
    events = ledger_of(harness_dir)
    assert [e["revision"] for e in events if e["event"] == "candidate_revised"] == [1, 2]
    limit = next(e for e in events if e["event"] == "revision_limit")
    assert limit["revisions"] == 2
    reverted = next(e for e in events if e["event"] == "candidate_reverted")
    assert reverted["gate"] == "quality" and "prompt bloat" in reverted["reason"]
    # The last version is the one in history (committed, then reverted); the tree is clean.
    repo = git.Repo(harness_dir)
    assert "bloat 2" in list(repo.iter_commits())[1].summary
    assert not repo.is_dirty(untracked_files=True)


class SameUselessRule:
    """Proposes one edit every time: a rule the scripted learner ignores (no gain, so refused)."""

    name = "same-rule"
    proposals = 0

    async def propose(self, context):
        SameUselessRule.proposals += 1
        path = context.system_prompt_path
        text = context.files[path] + "\nAlways double-check the answer before you submit it.\n"
        return Candidate({path: text}, "double-check rule", "", ("x",), (), self.name)

    async def revise(self, context, candidate, reason):
        return candidate


def test_a_harness_a_gate_rejected_is_not_judged_again(harness_dir: Path, cli, learner) -> None:
    registry.PROPOSERS["same-rule"] = SameUselessRule
    SameUselessRule.proposals = 0
    try:
        result = cli.invoke(app, run_args(harness_dir, learner, "-n", "3", "--proposer", "same-rule"))
    finally:
        del registry.PROPOSERS["same-rule"]
    assert result.exit_code in (0, 1), result.output
    events = ledger_of(harness_dir)
    assert SameUselessRule.proposals == 3
    judged = [e for e in events if e["event"] == "gate_verdicts"]
    reverted = [e for e in events if e["event"] == "candidate_reverted"]
    assert len(judged) == 1 and len(reverted) == 1  # generation 1 only
    duplicates = [e for e in events if e["event"] == "proposal_failed"]
    assert [e["generation"] for e in duplicates] == [2, 3]
    for event in duplicates:
        (error,) = event["errors"]
        assert error.startswith("duplicate: the same harness as candidate 1 of generation 1")
        assert "rejected by performance" in error and error.endswith("not judged again")
    finished = [e for e in events if e["event"] == "generation_finished"]
    assert [e["outcome"] for e in finished[1:]] == ["proposer had nothing new"] * 2


class OtherUselessRule(SameUselessRule):
    name = "other-rule"

    async def propose(self, context):
        path = context.system_prompt_path
        text = context.files[path] + "\nRead the task twice.\n"
        return Candidate({path: text}, "read-twice rule", "", ("x",), (), self.name)


def run_with_proposers(harness_dir: Path, cli, learner, generations: int, *proposers: type) -> None:
    """``run -n generations --proposer A,B`` with these test proposers registered by their names."""
    names = [p.name for p in proposers]
    registry.PROPOSERS.update(zip(names, proposers, strict=True))
    try:
        args = run_args(harness_dir, learner, "-n", str(generations), "--proposer", ",".join(names))
        result = cli.invoke(app, args)
    finally:
        for name in names:
            del registry.PROPOSERS[name]
    assert result.exit_code in (0, 1), result.output


def test_a_proposer_whose_candidate_was_refused_waits_behind_the_others(
    harness_dir: Path, cli, learner
) -> None:
    run_with_proposers(harness_dir, cli, learner, 2, SameUselessRule, OtherUselessRule)
    proposed = [e for e in ledger_of(harness_dir) if e["event"] == "candidate_proposed"]
    # generation 1: the chain's first; its candidate is refused, so generation 2 asks the other first
    assert [(e["generation"], e["proposer"]) for e in proposed] == [(1, "same-rule"), (2, "other-rule")]


class TwoRules(SameUselessRule):
    """Offers its first rule until a gate refused it, then its second."""

    name = "two-rules"

    async def propose(self, context):
        path = context.system_prompt_path
        for summary, rule in (("tidy rule", "Keep the folder tidy."), ("quiet rule", "Print nothing extra.")):
            if summary not in context.rejected:
                return Candidate(
                    {path: context.files[path] + f"\n{rule}\n"}, summary, "", ("x",), (), self.name
                )
        return None


def test_a_duplicate_counts_against_its_proposer_and_another_speaks_in_that_generation(
    harness_dir: Path, cli, learner
) -> None:
    from harnessevolve.core.tasks import load_benchmark
    from harnessevolve.pipeline.resume import resume_point
    from harnessevolve.runs.ledger import read_ledger

    run_with_proposers(harness_dir, cli, learner, 3, SameUselessRule, TwoRules)
    events = ledger_of(harness_dir)
    shown = [
        (e["generation"], e["event"], e["proposer"])
        for e in events
        if e["event"] in ("candidate_proposed", "proposal_failed")
    ]
    # 1: same-rule refused; 2: two-rules first (fewer refusals), refused; 3: a tie, the chain's order:
    # same-rule re-offers its refused harness (a duplicate, not judged), then two-rules speaks
    assert shown == [
        (1, "candidate_proposed", "same-rule"),
        (2, "candidate_proposed", "two-rules"),
        (3, "proposal_failed", "same-rule"),
        (3, "candidate_proposed", "two-rules"),
    ]
    assert [e["summary"] for e in events if e["event"] == "candidate_proposed"][-1] == "quiet rule"
    (run,) = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    point = resume_point(
        read_ledger(run / "ledger.jsonl"),
        load_benchmark("shell-basics"),
        run.name,
        patience=10,
        generations=3,
    )
    assert point.outcomes[:3] == [("same-rule", False), ("two-rules", False), ("same-rule", False)]


def test_a_resumed_run_remembers_the_harnesses_a_gate_rejected(harness_dir: Path, cli, learner) -> None:
    from harnessevolve.core.tasks import load_benchmark
    from harnessevolve.judging.trials import harness_state
    from harnessevolve.pipeline.resume import resume_point
    from harnessevolve.runs.ledger import read_ledger

    registry.PROPOSERS["same-rule"] = SameUselessRule
    try:
        files = dict(load_harness(harness_dir).files)
        result = cli.invoke(app, run_args(harness_dir, learner, "-n", "1", "--proposer", "same-rule"))
    finally:
        del registry.PROPOSERS["same-rule"]
    assert result.exit_code in (0, 1), result.output
    (run,) = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    events = read_ledger(run / "ledger.jsonl")
    (reverted,) = [e for e in events if e.event_name == "candidate_reverted"]
    path = "prompts/system.md"
    rule = files[path] + "\nAlways double-check the answer before you submit it.\n"
    assert reverted.harness_state == harness_state(files, {path: rule})
    point = resume_point(events, load_benchmark("shell-basics"), run.name, patience=10, generations=3)
    assert list(point.rejected_states) == [reverted.harness_state]
    assert "rejected by performance" in point.rejected_states[reverted.harness_state]
    assert point.outcomes == [("same-rule", False)]  # its strike survives the resume


def test_resume_counts_only_a_gates_refusal_against_a_proposer() -> None:
    from harnessevolve.core.tasks import load_benchmark
    from harnessevolve.pipeline.history import proposer_strikes
    from harnessevolve.pipeline.resume import resume_point
    from harnessevolve.runs import events as ev

    def rejected(n: int, proposer: str, gate: str | None) -> ev.CandidateRejected:
        file = f"candidates/gen-001-{n}.json"
        return ev.CandidateRejected(generation=1, candidate=n, of=3, file=file, proposer=proposer, gate=gate)

    events = [
        ev.Baseline(split="validation", rev="a" * 40, harness_hash="h", score=0.0, tasks=4),
        rejected(1, "demo", "performance"),
        rejected(2, "rules", None),  # passed every gate, another candidate scored higher
        ev.GenerationFinished(generation=1, outcome="none of 3 kept", rev="a" * 40),
    ]
    point = resume_point(events, load_benchmark("shell-basics"), "run", patience=10, generations=2)
    assert proposer_strikes(point.outcomes) == {"demo": 1}
