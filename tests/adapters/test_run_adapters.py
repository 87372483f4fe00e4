"""`refs import` and `run` through the CLI on a Harbor folder and on NL2Bash, scripted agent."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from policies import FamilyLearner
from run_args import run_args

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.cli.app import app
from harnessevolve.core import atif, paths
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.runs.ledger import read_lines
from harnessevolve.scoring.references import load_references

EXAMPLE = paths.builtin_dir("benchmarks") / "harbor-example"


def learner_for(spec: str) -> FamilyLearner:
    """``FamilyLearner`` on an adapted benchmark. A demonstration shows ``Task: <first line>``, and
    NL2Bash instructions run over several lines, so first lines name tasks too."""
    benchmark = load_benchmark_spec(spec)
    policy = FamilyLearner(benchmark)
    policy.by_instruction.update({t.instruction.splitlines()[0]: t for t in benchmark.tasks})
    return policy


@pytest.fixture
def harbor_suite(tmp_path: Path) -> Path:
    suite = tmp_path / "my-suite"
    shutil.copytree(EXAMPLE, suite, ignore=shutil.ignore_patterns("trajectories"))
    return suite


def events_of(harness_dir: Path) -> list[str]:
    (run_dir,) = (harness_dir / ".harnessevolve" / "runs").iterdir()
    return [e["event"] for e in read_lines(run_dir / "ledger.jsonl")]


def test_refs_import_replays_solve_sh_into_the_suite(cli, harbor_suite: Path) -> None:
    result = cli.invoke(app, ["refs", "import", "--benchmark", f"harbor:{harbor_suite}", "--split", "all"])
    assert result.exit_code == 0, result.output
    assert "wrote 5 reference trajectories" in result.output
    folder = harbor_suite / "trajectories"
    assert sorted(p.stem for p in folder.glob("*.json")) == sorted(
        t.id for t in load_benchmark_spec(str(harbor_suite)).tasks
    )
    reference = atif.load(folder / "count-words.json")
    assert reference.extra["reference"] == "gold-replay" and reference.task_id == "count-words"
    bash = reference.agent_steps[0].tool_calls[0]
    assert bash.function_name == "bash" and "wc -w" in bash.arguments["command"]
    # The references folder is not mistaken for a task, and they load for the run.
    bench = load_benchmark_spec(str(harbor_suite))
    assert len(bench.tasks) == 5 and set(load_references(bench)) == {t.id for t in bench.tasks}


def test_run_on_a_harbor_folder(cli, harness_dir: Path, harbor_suite: Path) -> None:
    assert cli.invoke(app, ["refs", "import", "-b", str(harbor_suite), "--split", "all"]).exit_code == 0
    register_script("harbor-learner", learner_for(str(harbor_suite)))
    try:
        result = cli.invoke(
            app, run_args(harness_dir, "scripted/harbor-learner", benchmark=harbor_suite, generations=1)
        )
        assert result.exit_code == 0, result.output
        # three train tasks of three families: the accepted demonstration teaches the agent one
        assert "1 accepted, 0 reverted" in result.output and "0.000->0.333" in result.output, result.output
        kinds = events_of(harness_dir)
        assert kinds[0] == "run_started" and "baseline" in kinds and kinds.count("generation_finished") == 1
        assert kinds[-1] == "run_finished"
        # `report --final` finds the suite again from the run's ledger (the spec, not just the name)
        final = cli.invoke(
            app, ["report", "--harness", str(harness_dir), "--final", "--model", "scripted/harbor-learner"]
        )
        assert final.exit_code == 0, final.output
        assert "test_evaluated" in events_of(harness_dir)
    finally:
        unregister_script("harbor-learner")


@pytest.fixture
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HARNESSEVOLVE_HOME whose trajectories/ is empty (the rest links to the checkout), so that
    NL2Bash references built by a test stay out of the checkout."""
    home = tmp_path / "home"
    (home / "trajectories").mkdir(parents=True)
    for kind in ("benchmarks", "gates", "harnesses"):
        (home / kind).symlink_to(paths.builtin_dir(kind))
    monkeypatch.setenv("HARNESSEVOLVE_HOME", str(home))
    return home


def test_run_on_nl2bash_tasks(cli, harness_dir: Path, private_home: Path) -> None:
    result = cli.invoke(app, ["refs", "import", "-b", "nl2bash:5", "--split", "all"])
    assert result.exit_code == 0, result.output
    refs = private_home / "trajectories" / "nl2bash"  # the folder every subset shares
    assert len(list(refs.glob("*.json"))) == len(load_benchmark_spec("nl2bash:5").tasks) == 16
    register_script("nl2bash-learner", learner_for("nl2bash:5"))
    try:
        result = cli.invoke(
            app, run_args(harness_dir, "scripted/nl2bash-learner", benchmark="nl2bash:5", generations=1)
        )
    finally:
        unregister_script("nl2bash-learner")
    assert result.exit_code == 0, result.output
    # every task is one family: one demonstration of an NL2Bash task teaches the scripted agent all.
    # Read from the ledger, not the table: a rollout the sandbox could not start on a loaded machine
    # (an infrastructure failure, retried or left out) may change a batch's figure, not the decision.
    (run_dir,) = (harness_dir / ".harnessevolve" / "runs").iterdir()
    lines = read_lines(run_dir / "ledger.jsonl")
    (gen,) = [e for e in lines if e["event"] == "generation_finished"]
    decided = [e["event"] for e in lines if e["event"].startswith("candidate_")]
    assert decided.count("candidate_accepted") == 1 and "candidate_reverted" not in decided, (
        result.output,
        lines,
    )
    assert gen["train_current"] == 0.0 and gen["train_candidate"] > 0.5, (result.output, gen)
    assert "validation 0.000 -> 1.000" in result.output, result.output
    kinds = events_of(harness_dir)
    assert kinds[0] == "run_started" and "baseline" in kinds and kinds.count("generation_finished") == 1
    assert kinds[-1] == "run_finished"
