"""`run` through the CLI with the scripted provider: history, ledger, exit codes, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import git
import pytest
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.runs.ledger import read_lines


def only_run_dir(harness_dir: Path) -> Path:
    runs = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    assert len(runs) == 1
    return runs[0]


def test_two_generations_one_accepted_one_reverted(harness_dir: Path, cli, learner) -> None:
    result = cli.invoke(app, run_args(harness_dir, learner))
    assert result.exit_code == 0, result.output
    assert "1 accepted, 1 reverted" in result.output

    repo = git.Repo(harness_dir)
    summaries = [c.summary for c in repo.iter_commits()][::-1]
    assert summaries[0].startswith("harnessevolve: new harness")
    assert summaries[1].startswith("harnessevolve: add a demonstration of")
    assert summaries[2].startswith("harnessevolve: add a demonstration of")
    assert summaries[3].startswith("harnessevolve: revert") and "performance gate" in summaries[3]
    assert len(summaries) == 4
    revert, rejected, accepted, _init = list(repo.iter_commits())
    assert "Targets: premature_finish" in accepted.message and "Proposer: demo" in accepted.message
    assert f"Reverts: {rejected.hexsha}" in revert.message and "gain=-" in revert.message
    assert not repo.is_dirty(untracked_files=True)
    # The harness now holds exactly one demonstration: the accepted one.
    assert (harness_dir / "prompts" / "examples.md").read_text().count("## Example") == 1

    events = read_lines(only_run_dir(harness_dir) / "ledger.jsonl")
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.count("candidate_committed") == 2
    accepted_event = next(e for e in events if e["event"] == "candidate_accepted")
    reverted_event = next(e for e in events if e["event"] == "candidate_reverted")
    assert accepted_event["sha"] == accepted.hexsha
    assert reverted_event["sha"] == rejected.hexsha and reverted_event["gate"] == "performance"
    assert reverted_event["revert_sha"] == revert.hexsha
    assert events[-1]["accepted"] == [accepted.hexsha] and events[-1]["reverted"] == [rejected.hexsha]
    gate_file = only_run_dir(harness_dir) / "gates" / "gen-002.json"
    verdicts = json.loads(gate_file.read_text())["verdicts"]
    # the default pooled decision weighs validation with the batch: it is scored while more wins
    # there could still keep the candidate, and stops once none could (no held-out score then)
    assert [v["gate"] for v in verdicts] == ["quality", "leakage", "smoke", "performance"]
    perf = verdicts[3]
    assert not perf["passed"] and perf["numbers"]["mode"] == "pooled"
    stopped = perf["numbers"]["validation_stopped"]
    assert 0 < stopped["scored"] < stopped["scored"] + stopped["unseen"]
    assert f"validation stopped after {stopped['scored']} of" in perf["reason"]


def test_run_saves_atif_trajectories(harness_dir: Path, cli, learner) -> None:
    result = cli.invoke(app, run_args(harness_dir, learner, "-n", "1"))
    assert result.exit_code == 0, result.output
    files = list((only_run_dir(harness_dir) / "trajectories").rglob("*.json"))
    assert files
    doc = json.loads(files[0].read_text())
    assert doc["schema_version"] == "ATIF-v1.5" and doc["extra"]["task_id"]
    assert {d["function"]["name"] for d in doc["agent"]["tool_definitions"]} >= {"bash", "submit"}


def test_run_without_any_accepted_edit_exits_1(tmp_path: Path, harness_dir: Path, cli) -> None:
    gates = tmp_path / "strict.yaml"
    gates.write_text("version: 1\nperformance:\n  mode: fixed\n  min_gain: 0.01\n")
    register_script(
        "gives-up", lambda m, t: {"tool_calls": [{"name": "submit", "arguments": {"answer": "?"}}]}
    )
    try:
        result = cli.invoke(app, run_args(harness_dir, "scripted/gives-up", "-n", "1", "--gates", str(gates)))
    finally:
        unregister_script("gives-up")
    assert result.exit_code == 1, result.output
    assert "0 accepted, 1 reverted" in result.output


def test_dirty_tree_refused_and_nothing_written(harness_dir: Path, cli, learner) -> None:
    (harness_dir / "prompts" / "system.md").write_text("my unsaved edit\n")
    head = git.Repo(harness_dir).head.commit.hexsha
    result = cli.invoke(app, run_args(harness_dir, learner))
    assert result.exit_code == 2
    assert "uncommitted changes" in result.output and "--allow-dirty" in result.output
    assert git.Repo(harness_dir).head.commit.hexsha == head
    assert (harness_dir / "prompts" / "system.md").read_text() == "my unsaved edit\n"
    assert not (harness_dir / ".harnessevolve" / "runs").exists()


def test_allow_dirty_snapshots_changes_first(harness_dir: Path, cli, learner) -> None:
    (harness_dir / "prompts" / "system.md").write_text("my unsaved edit\n")
    result = cli.invoke(app, run_args(harness_dir, learner, "--allow-dirty", "-n", "1"))
    assert result.exit_code == 0, result.output
    repo = git.Repo(harness_dir)
    snapshot = [c for c in repo.iter_commits() if "snapshot uncommitted changes" in c.summary]
    assert len(snapshot) == 1
    assert "my unsaved edit" in (harness_dir / "prompts" / "system.md").read_text()


def test_unknown_benchmark(harness_dir: Path, cli, learner) -> None:
    result = cli.invoke(app, run_args(harness_dir, learner, benchmark="nope"))
    assert result.exit_code == 2
    assert "unknown benchmark 'nope'" in result.output and "shell-basics" in result.output


def test_malformed_harness_yaml(harness_dir: Path, cli, learner) -> None:
    path = harness_dir / "harness.yaml"
    path.write_text(path.read_text().replace("temperature: 0.0", "temperature: hot"))
    repo = git.Repo(harness_dir)
    repo.git.commit("-qam", "break it")
    result = cli.invoke(app, run_args(harness_dir, learner))
    assert result.exit_code == 2
    assert "harness.yaml: loop.temperature" in result.output
    assert not (harness_dir / ".harnessevolve" / "runs").exists()


def copy_benchmark(tmp_path: Path, shell_basics) -> Path:
    import shutil

    target = tmp_path / "bench"
    shutil.copytree(shell_basics.root, target)
    shutil.copytree(shell_basics.references_dir, target / "trajectories")
    return target


def refused_run(cli, harness_dir: Path, model: str, bench: Path) -> str:
    """`run` on the benchmark folder ``bench``, refused as bad input (exit 2); its output."""
    result = cli.invoke(app, run_args(harness_dir, model, benchmark=bench))
    assert result.exit_code == 2
    return result.output


def test_reference_for_unknown_task(tmp_path: Path, harness_dir: Path, cli, learner, shell_basics) -> None:
    bench = copy_benchmark(tmp_path, shell_basics)
    (bench / "trajectories" / "count-lines-01.json").rename(bench / "trajectories" / "no-such-task.json")
    assert "unknown task 'no-such-task'" in refused_run(cli, harness_dir, learner, bench)


def test_corrupt_reference_names_field(tmp_path: Path, harness_dir: Path, cli, learner, shell_basics) -> None:
    bench = copy_benchmark(tmp_path, shell_basics)
    path = bench / "trajectories" / "count-lines-01.json"
    doc = json.loads(path.read_text())
    del doc["steps"][2]["source"]
    path.write_text(json.dumps(doc))
    assert "count-lines-01.json: steps[2]" in refused_run(cli, harness_dir, learner, bench)


def test_malformed_task_file(tmp_path: Path, harness_dir: Path, cli, learner, shell_basics) -> None:
    bench = copy_benchmark(tmp_path, shell_basics)
    path = bench / "tasks" / "count-lines-01.yaml"
    path.write_text(path.read_text().replace("split: train", "split: training"))
    assert "count-lines-01.yaml: split" in refused_run(cli, harness_dir, learner, bench)


def test_second_run_on_same_harness_is_refused(harness_dir: Path, cli, learner) -> None:
    lock = harness_dir / ".harnessevolve" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text(json.dumps({"pid": os.getpid(), "run_id": "other-run"}))
    result = cli.invoke(app, run_args(harness_dir, learner))
    assert result.exit_code == 2
    assert "other-run" in result.output and "lock" in result.output
    assert lock.exists()


def test_stale_lock_is_reported_and_replaced(harness_dir: Path, cli, learner) -> None:
    lock = harness_dir / ".harnessevolve" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text(json.dumps({"pid": 2**22 + 12345, "run_id": "dead-run"}))
    result = cli.invoke(app, run_args(harness_dir, learner, "-n", "1"))
    assert result.exit_code == 0, result.output
    assert "stale lock" in result.output
    events = read_lines(only_run_dir(harness_dir) / "ledger.jsonl")
    assert any(e["event"] == "stale_lock_removed" for e in events)
    assert not lock.exists()


def test_interrupt_records_where_and_exits_130(harness_dir: Path, cli, learner, shell_basics) -> None:
    from policies import FamilyLearner

    inner = FamilyLearner(shell_basics)
    calls = {"n": 0}

    def interrupting(messages, tools):
        calls["n"] += 1
        if "## Example" in messages[0]["content"]:
            raise KeyboardInterrupt  # Ctrl-C while the first candidate is being evaluated
        return inner(messages, tools)

    register_script("interrupting", interrupting)
    try:
        result = cli.invoke(app, run_args(harness_dir, "scripted/interrupting"))
    finally:
        unregister_script("interrupting")
    assert result.exit_code == 130, result.output
    events = read_lines(only_run_dir(harness_dir) / "ledger.jsonl")
    last = events[-1]
    assert last["event"] == "run_interrupted"
    assert last["generation"] == 1 and last["stage"] == "gate"
    repo = git.Repo(harness_dir)
    # Candidates are judged in a scratch copy and committed only with a verdict: nothing to undo.
    assert repo.head.commit.summary.startswith("harnessevolve: new harness")
    assert "candidate_committed" not in [e["event"] for e in events]
    assert not repo.is_dirty(untracked_files=True)
    assert not (harness_dir / ".harnessevolve" / "lock").exists()


@pytest.mark.parametrize("flag", [["--proposer", "magic"]])
def test_unknown_proposer(harness_dir: Path, cli, learner, flag) -> None:
    result = cli.invoke(app, run_args(harness_dir, learner, *flag))
    assert result.exit_code == 2
    assert "unknown proposer 'magic'" in result.output


def test_report_final_scores_the_test_split_once_and_logs_it(harness_dir: Path, cli, learner) -> None:
    assert cli.invoke(app, run_args(harness_dir, learner)).exit_code == 0
    ledger = only_run_dir(harness_dir) / "ledger.jsonl"
    assert not any(e["event"] == "test_evaluated" for e in read_lines(ledger))
    # The run itself never touched the test split.
    scored = {p.stem for p in (only_run_dir(harness_dir) / "trajectories").rglob("*.json")}
    assert not any(task.endswith(("-07", "-08")) for task in scored)

    result = cli.invoke(app, ["report", "--harness", str(harness_dir), "--final", "--model", learner])
    assert result.exit_code == 0, result.output
    assert "1 of 2 candidate edits accepted" in result.output
    events = [e for e in read_lines(ledger) if e["event"] == "test_evaluated"]
    assert len(events) == 1
    assert events[0]["scores"]["evolved"] > events[0]["scores"]["seed"]
    assert (
        f"{(events[0]['scores']['evolved'] - events[0]['scores']['seed']) * 100:+.1f} points" in result.output
    )


def test_report_without_runs(harness_dir: Path, cli) -> None:
    result = cli.invoke(app, ["report", "--harness", str(harness_dir)])
    assert result.exit_code == 2
    assert "no runs yet" in result.output


def test_sequential_performance_mode_runs_and_logs_its_increments(
    tmp_path: Path, harness_dir: Path, cli, learner
):
    gates = tmp_path / "noise.yaml"
    gates.write_text("version: 1\nperformance:\n  mode: sequential\n  increment: 8\n")
    result = cli.invoke(app, run_args(harness_dir, learner, "-n", "1", "--gates", str(gates)))
    assert result.exit_code in (0, 1), result.output
    events = read_lines(only_run_dir(harness_dir) / "ledger.jsonl")
    increments = [e for e in events if e["event"] == "performance_increment"]
    assert increments and all(e["generation"] == 1 for e in increments)
    verdict = next(e for e in events if e["event"] == "gate_verdicts")["verdicts"]
    perf = next(v for v in verdict if v["gate"] == "performance")
    assert perf["numbers"]["mode"] == "sequential"
    outcome = "candidate_accepted" if perf["passed"] else "candidate_reverted"
    assert any(e["event"] == outcome for e in events)


def test_a_leaking_edit_is_reverted_by_the_leakage_gate(
    harness_dir: Path, cli, learner, shell_basics
) -> None:
    from harnessevolve.optimize import registry
    from harnessevolve.optimize.proposal import Candidate, ProposalFailed

    secret = shell_basics.split("test")[0]

    class Leaky:
        name = "leaky"

        async def propose(self, context):
            text = (
                context.files[context.system_prompt_path] + f"\nIf asked '{secret.instruction}', answer it.\n"
            )
            return Candidate({context.system_prompt_path: text}, "leak a test task", "", ("x",), (), "leaky")

        async def revise(self, context, candidate, reason):  # the Proposer protocol: revise or refuse
            raise ProposalFailed("leaky", [f"cannot answer {reason!r}"])

    registry.PROPOSERS["leaky"] = Leaky
    try:
        result = cli.invoke(app, run_args(harness_dir, learner, "-n", "1", "--proposer", "leaky"))
    finally:
        del registry.PROPOSERS["leaky"]
    assert result.exit_code == 1, result.output
    reverted = next(
        e
        for e in read_lines(only_run_dir(harness_dir) / "ledger.jsonl")
        if e["event"] == "candidate_reverted"
    )
    assert reverted["gate"] == "leakage" and secret.id in json.dumps(reverted)


def test_a_candidate_that_breaks_the_model_call_fails_the_smoke_run(
    harness_dir: Path, cli, shell_basics
) -> None:
    from policies import FragileLearner

    register_script("fragile", FragileLearner(shell_basics))
    try:
        result = cli.invoke(app, run_args(harness_dir, "scripted/fragile", "-n", "1"))
    finally:
        unregister_script("fragile")
    assert result.exit_code == 1, result.output
    reverted = next(
        e
        for e in read_lines(only_run_dir(harness_dir) / "ledger.jsonl")
        if e["event"] == "candidate_reverted"
    )
    assert reverted["gate"] == "smoke" and "model_error" in reverted["reason"]


def test_a_model_that_always_fails_stops_the_run_as_bad_input(harness_dir: Path, cli) -> None:
    def broken(messages, tools):
        raise RuntimeError("401 missing API key")

    register_script("broken", broken)
    head = git.Repo(harness_dir).head.commit.hexsha
    try:
        result = cli.invoke(app, run_args(harness_dir, "scripted/broken"))
    finally:
        unregister_script("broken")
    assert result.exit_code == 2, result.output
    assert "every rollout failed calling scripted/broken" in result.output and "API key" in result.output
    assert git.Repo(harness_dir).head.commit.hexsha == head
    events = read_lines(only_run_dir(harness_dir) / "ledger.jsonl")
    assert events[-1]["event"] == "run_failed" and events[-1]["stage"] == "baseline"
    assert not (harness_dir / ".harnessevolve" / "lock").exists()
