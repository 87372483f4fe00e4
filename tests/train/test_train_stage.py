"""`run --train-every 1`: the trainer stage inside the generation loop, on the scripted provider
(a tiny random checkpoint stands in for the agent's weights)."""

from __future__ import annotations

from pathlib import Path

from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.runs.ledger import read_lines


def test_a_run_goes_through_the_trainer_stage_and_switches_the_agent_model(
    harness_dir: Path, cli, learner, tiny_base: Path
) -> None:
    result = cli.invoke(
        app,
        run_args(
            harness_dir,
            learner,
            "--train-every",
            "1",
            "--train-base-model",
            str(tiny_base),
            batch_size=4,
        ),
    )
    assert result.exit_code in (0, 1), result.output
    (run,) = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    events = read_lines(run / "ledger.jsonl")
    trained = next(e for e in events if e["event"] == "policy_trained")
    assert trained["generation"] == 1 and trained["samples"] > 0
    assert Path(trained["checkpoint"]).is_dir() and (Path(trained["checkpoint"]) / "config.json").exists()
    changed = next(e for e in events if e["event"] == "agent_model_changed")
    assert changed["model"] == trained["model"] and changed["model"].startswith("local/torch:")
    # Generation 2 ran its batch with the trained checkpoint as the agent model.
    kinds = [e["event"] for e in events]
    assert kinds.index("agent_model_changed") < max(i for i, k in enumerate(kinds) if k == "batch_evaluated")
    models = {
        p.read_text().count(changed["model"].removeprefix("local/torch:"))
        for p in (run / "trajectories").rglob("*.json")
    }
    assert max(models) > 0
    assert events[-1]["event"] == "run_finished"


def test_train_every_needs_weights_it_can_train(harness_dir: Path, cli, learner) -> None:
    result = cli.invoke(app, run_args(harness_dir, learner, "--train-every", "1"))
    assert result.exit_code == 2
    assert "cannot fine-tune 'scripted/family-learner'" in result.output
    assert not (harness_dir / ".harnessevolve" / "runs").exists()
