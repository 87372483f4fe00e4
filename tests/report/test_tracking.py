"""MLflow tracking: a real run's ledger mirrored into a local MLflow store in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripted_run import copy_run, ledger_events
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.report.tracking import (
    RUN_ID_TAG,
    MlflowTracker,
    NullTracker,
    event_metrics,
    make_tracker,
    mirror_run,
)
from harnessevolve.runs.events import parse_event

mlflow = pytest.importorskip("mlflow", reason="the tracking extra is not installed")


def tracked_run(client, run_id: str):
    runs = client.search_experiments()
    found = client.search_runs(
        [e.experiment_id for e in runs], filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'"
    )
    assert len(found) == 1
    return found[0]


def test_default_local_store_beside_the_harness(finished_run: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run = copy_run(finished_run, tmp_path)
    harness = run.parents[2]
    tracker = make_tracker("mlflow", harness)
    assert isinstance(tracker, MlflowTracker)
    assert tracker.tracking_uri == f"sqlite:///{harness.resolve()}/.harnessevolve/mlflow.db"
    events = ledger_events(run)
    mirror_run(tracker, [parse_event(e) for e in events])
    client = mlflow.MlflowClient(tracker.tracking_uri)
    tracked = tracked_run(client, run.name)
    assert tracked.info.status == "FINISHED" and tracked.info.run_name == run.name
    assert (
        tracked.data.params["benchmark"] == "shell-basics"
        and tracked.data.params["options.generations"] == "2"
    )
    validation = client.get_metric_history(tracked.info.run_id, "validation/current")
    expected = [(0, events[1]["score"])] + [
        (e["generation"], e["validation"]) for e in events if e["event"] == "generation_finished"
    ]
    assert sorted((m.step, m.value) for m in validation) == sorted(expected)
    assert tracked.data.metrics["candidates/accepted"] == 1.0
    assert tracked.data.metrics["gate/performance/passed"] == 0.0  # the last verdict: gen 2 was reverted
    assert "cluster/premature_finish" in tracked.data.metrics
    artifacts = {a.path for a in client.list_artifacts(tracked.info.run_id)}
    assert {"ledger.jsonl", "gates"} <= artifacts
    assert (harness / ".harnessevolve" / "mlruns").is_dir()
    mirror_run(make_tracker("mlflow", harness), [parse_event(e) for e in events])  # a replay adds nothing
    assert tracked_run(client, run.name).info.run_id == tracked.info.run_id


def test_file_store_interrupted_then_resumed_run(finished_run: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    events = ledger_events(finished_run)
    stop = {"v": 1, "ts": events[5]["ts"], "event": "run_interrupted", "generation": 1, "stage": "gate"}
    stop["error"] = "KeyboardInterrupt()"
    tracker = make_tracker("mlflow", finished_run.parents[2])
    mirror_run(tracker, [parse_event(e) for e in events[:5] + [stop]])
    client = mlflow.MlflowClient()
    assert tracked_run(client, finished_run.name).info.status == "KILLED"
    resumed = {**events[0], "event": "run_resumed", "next_generation": 1, "recovered": [], "stale_lock": None}
    mirror_run(
        make_tracker("mlflow", finished_run.parents[2]), [parse_event(e) for e in [resumed] + events[5:]]
    )
    tracked = tracked_run(client, finished_run.name)
    assert tracked.info.status == "FINISHED" and tracked.data.metrics["candidates/accepted"] == 1.0


def test_report_track_mlflow_from_the_cli(finished_run: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "cli-mlruns").as_uri())
    result = CliRunner().invoke(app, ["report", str(finished_run), "--track", "mlflow"])
    assert result.exit_code == 0, result.output
    assert "MLflow" in result.output
    assert tracked_run(mlflow.MlflowClient(), finished_run.name).info.status == "FINISHED"


def test_a_store_failing_mid_run_never_stops_the_run(tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    tracker = MlflowTracker(tmp_path, tracking_uri=(tmp_path / "mlruns").as_uri())
    tracker.on_event(
        parse_event(
            {
                "event": "run_started",
                "run_id": "x",
                "harness": "h",
                "rev": "r",
                "benchmark": "b",
                "options": {},
                "gates": None,
            }
        )
    )

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(tracker.client, "log_batch", broken)
    tracker.on_event(
        parse_event(
            {
                "event": "baseline",
                "split": "validation",
                "rev": "r",
                "harness_hash": "h",
                "score": 0.5,
                "tasks": 1,
            }
        )
    )
    tracker.on_event(parse_event({"event": "run_finished", "accepted": [], "reverted": [], "rev": "r"}))
    assert tracker.broken and "MLflow tracking stopped" in caplog.text and "disk full" in caplog.text


def test_a_store_that_cannot_be_opened_is_refused_up_front(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    with pytest.raises(HarnessEvolveError, match="cannot open the MLflow store"):
        MlflowTracker(tmp_path, tracking_uri=(tmp_path / "plain-files").as_uri())


def test_make_tracker_off_and_unknown(tmp_path: Path) -> None:
    assert isinstance(make_tracker(None, tmp_path), NullTracker)
    assert isinstance(make_tracker("none", tmp_path), NullTracker)
    with pytest.raises(HarnessEvolveError, match="unknown tracker 'wandb'"):
        make_tracker("wandb", tmp_path)


def test_event_metrics_names_are_sanitised_and_usage_is_read() -> None:
    metrics = event_metrics(
        parse_event(
            {
                "event": "batch_evaluated",
                "generation": 1,
                "harness_hash": "h",
                "tasks": ["t1", "t2", "t3"],
                "score": 0.25,
                "failed": 3,
                "clusters": [{"cause": "wrong tool: (bash)", "size": 3, "severity": 1.0}],
            }
        )
    )
    metrics |= event_metrics(
        parse_event(
            {
                "event": "run_interrupted",
                "generation": 1,
                "stage": "gate",
                "error": "KeyboardInterrupt()",
                "usage": {"by_stage": {"execute": {"tokens": 120, "cost_usd": 0.01, "calls": 4}}},
            }
        )
    )
    assert metrics["cluster/wrong tool_ _bash_"] == 3.0 and metrics["train/current"] == 0.25
    assert metrics["usage/execute/tokens"] == 120.0 and metrics["usage/execute/cost_usd"] == 0.01
