"""`harnessevolve train` on a scripted run's folder and on a trajectory folder; the pipeline stage;
the message when torch is missing."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import git
import pytest
from policies import FamilyLearner
from run_args import run_args
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.core import atif
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.pipeline.state import RunState
from harnessevolve.pipeline.training import train_generation
from harnessevolve.runs.ledger import Ledger, read_lines
from harnessevolve.train.checkpoint import read_metadata
from harnessevolve.train.config import TrainConfig
from harnessevolve.train.errors import TrainError

TINY = ["--steps", "2", "--max-len", "512", "--device", "cpu", "--lr", "1e-3"]


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(harness dir, run folder): a finished one-generation run of the scripted family learner on
    shell-basics (module-scoped: tests copy nothing and only add files of their own)."""
    cli = CliRunner()
    harness_dir = tmp_path_factory.mktemp("train-run") / "harness"
    assert cli.invoke(app, ["init", str(harness_dir)]).exit_code == 0
    register_script("train-learner", FamilyLearner(load_benchmark("shell-basics")))
    try:
        with pytest.MonkeyPatch.context() as patch:
            for role in ("AUTHOR", "COMMITTER"):
                patch.setenv(f"GIT_{role}_NAME", "harnessevolve tests")
                patch.setenv(f"GIT_{role}_EMAIL", "tests@harnessevolve.invalid")
            result = cli.invoke(
                app, run_args(harness_dir, "scripted/train-learner", generations=1, batch_size=4)
            )
    finally:
        unregister_script("train-learner")
    assert result.exit_code in (0, 1), result.output
    (folder,) = (harness_dir / ".harnessevolve" / "runs").iterdir()
    return harness_dir, folder


@pytest.fixture
def run_dir(scripted_run: tuple[Path, Path]) -> Path:
    return scripted_run[1]


def test_train_on_a_run_folder_uses_train_split_rollouts_and_references(
    scripted_run: tuple[Path, Path], cli: CliRunner, tiny_base: Path, tmp_path: Path
) -> None:
    harness_dir, run_dir = scripted_run
    out = tmp_path / "ckpt"
    args = [
        "train",
        "--run",
        str(run_dir),
        "--base-model",
        str(tiny_base),
        "--out",
        str(out),
        "--json",
        *TINY,
    ]
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["checkpoint"] == str(out.resolve()) and doc["model"] == f"local/torch:{out.resolve()}"

    benchmark = load_benchmark("shell-basics")
    train_ids = {t.id for t in benchmark.split("train")}
    saved = [atif.load(p) for p in (run_dir / "trajectories").glob("*/*.json")]
    assert any(t.task_id not in train_ids for t in saved), "the run scored validation tasks too"
    assert doc["data"]["rollouts"] == sum(t.task_id in train_ids for t in saved)  # validation left out
    assert doc["data"]["references"] == len(list(benchmark.references_dir.glob("*.json"))) - sum(
        p.stem not in train_ids for p in benchmark.references_dir.glob("*.json")
    )
    metadata = read_metadata(out)
    assert metadata["run_id"] == run_dir.name
    assert metadata["harness_rev"] == git.Repo(harness_dir).head.commit.hexsha
    assert metadata["config"]["steps"] == 2 and len(metadata["fit"]["loss_curve"]) == 2


def test_train_on_a_trajectory_folder_prints_a_table(
    trajectory_folder: Path, cli: CliRunner, tiny_base: Path, tmp_path: Path
) -> None:
    out = tmp_path / "from-folder"
    args = [
        "train",
        "--trajectories",
        str(trajectory_folder),
        "--base-model",
        str(tiny_base),
        "--out",
        str(out),
    ]
    result = cli.invoke(app, args + TINY + ["--mode", "grpo"])
    assert result.exit_code == 0, result.output
    assert "grpo" in result.output and "local/torch:" in result.output
    assert read_metadata(out)["config"]["mode"] == "grpo"


@pytest.mark.parametrize(
    "args",
    [["train"], ["train", "--run", "x", "--trajectories", "y"], ["train", "--run", "no-such-run"]],
    ids=["neither", "both", "unknown-run"],
)
def test_bad_input_exits_2_with_one_line(cli: CliRunner, args: list[str]) -> None:
    result = cli.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Error:" in result.output and "Traceback" not in result.output


def test_without_torch_train_says_how_to_install(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch, trajectory_folder: Path
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` meets without the extra
    result = cli.invoke(app, ["train", "--trajectories", str(trajectory_folder)])
    assert result.exit_code == 2, result.output
    assert "'torch' is not installed" in result.output
    assert "pip install 'harnessevolve[train]'" in result.output


def test_pipeline_stage_trains_and_writes_the_ledger(run_dir: Path, tiny_base: Path, tmp_path: Path) -> None:
    # The training stage runs inside a generation: the same run folder, before run_finished (a
    # finished ledger refuses further events).
    run_dir = Path(shutil.copytree(run_dir, tmp_path / run_dir.name))
    lines = (run_dir / "ledger.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "ledger.jsonl").write_text("".join(x for x in lines if '"event": "run_finished"' not in x))
    ledger = Ledger(run_dir / "ledger.jsonl")
    state = RunState(run_dir.name, generation=1, stage="gate")
    outcome = train_generation(
        run_dir,
        state,
        agent_model="scripted/family-learner",
        base_model=str(tiny_base),
        config=TrainConfig.tiny(steps=2),
        ledger=ledger,
    )
    ledger.close()
    checkpoint = run_dir / "checkpoints" / "gen-001"
    assert outcome.trained and outcome.model == f"local/torch:{checkpoint.resolve()}"
    assert state.stage == "gate"
    event = read_lines(run_dir / "ledger.jsonl")[-1]
    assert event["event"] == "policy_trained" and event["checkpoint"] == str(checkpoint.resolve())
    for key in ("loss_before", "loss_after", "tokens", "seconds", "samples"):
        assert isinstance(event[key], int | float)


def test_pipeline_stage_skips_when_there_is_nothing_to_learn(run_dir: Path, tiny_base: Path) -> None:
    state = RunState(run_dir.name, generation=2)
    config = TrainConfig.tiny(mode="grpo", include_references=False, min_group=50)
    outcome = train_generation(
        run_dir, state, agent_model="local/torch:x", base_model=str(tiny_base), config=config
    )
    assert not outcome.trained and outcome.model == "local/torch:x" and "GRPO" in outcome.record["skipped"]
    with pytest.raises(TrainError, match="only local/ models"):
        train_generation(run_dir, state, agent_model="openai/gpt-4o-mini", config=config)
