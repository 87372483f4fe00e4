"""Optional experiment tracking: every ledger event mirrored into MLflow as params, metrics, tags
and artifacts. Off unless asked for (``make_tracker("mlflow", ...)``); needs the ``tracking`` extra.

Where MLflow writes: ``MLFLOW_TRACKING_URI`` when set, else a local store beside the harness --
``DIR/.harnessevolve/mlflow.db`` (SQLite) with artifacts in ``DIR/.harnessevolve/mlruns/``. MLflow
3.x refuses its plain file store unless ``MLFLOW_ALLOW_FILE_STORE=true``; with that set, a
``file:`` tracking URI works too. View with ``mlflow ui --backend-store-uri sqlite:///DIR/.harnessevolve/mlflow.db``.

A tracker never stops a run: the first error is logged once and the tracker goes quiet.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import Any, Protocol

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.runs import events as ev
from harnessevolve.runs.rundir import STATE_DIR

log = logging.getLogger(__name__)
RUN_ID_TAG = "harnessevolve.run_id"
END_STATUS = {ev.RunFinished.NAME: "FINISHED", ev.RunFailed.NAME: "FAILED", ev.RunInterrupted.NAME: "KILLED"}


class Tracker(Protocol):
    """Receives every ledger record (the dict ``Ledger.append`` returns), in order.

    ``on_event`` must return quickly and never raise; ``close`` flushes and ends the tracked run.
    """

    def on_event(self, event: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class NullTracker:
    def on_event(self, event: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


def default_tracking_uri(harness_dir: Path) -> str:
    return (
        os.environ.get("MLFLOW_TRACKING_URI")
        or f"sqlite:///{(Path(harness_dir) / STATE_DIR).resolve()}/mlflow.db"
    )


def metric_name(*parts: Any) -> str:
    """MLflow keys allow letters, digits, ``_ - . /`` and spaces; anything else becomes ``_``."""
    return "/".join(re.sub(r"[^A-Za-z0-9_\-. ]", "_", str(p)) for p in parts)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def event_metrics(event: dict[str, Any]) -> dict[str, float]:
    """The numbers an event contributes, keyed by metric name (step: its generation)."""
    name = event.get("event")
    out: dict[str, float] = {}
    if name == ev.Baseline.NAME and _number(event.get("score")) is not None:
        out["validation/current"] = float(event["score"])
    elif name == ev.BatchEvaluated.NAME:
        out["train/current"] = float(event.get("score") or 0.0)
        out["train/failed"] = float(event.get("failed") or 0)
        for cluster in event.get("clusters") or []:
            out[metric_name("cluster", cluster.get("cause", "?"))] = float(cluster.get("size") or 0)
    elif name in (ev.GateVerdicts.NAME, ev.CandidateRejected.NAME):
        for verdict in event.get("verdicts") or []:
            gate = verdict.get("gate", "?")
            out[metric_name("gate", gate, "passed")] = 1.0 if verdict.get("passed") else 0.0
            for key, value in (verdict.get("numbers") or {}).items():
                if _number(value) is not None:
                    out[metric_name("gate", gate, key)] = float(value)
    elif name == ev.CandidateAccepted.NAME and _number(event.get("validation")) is not None:
        out["validation/candidate"] = float(event["validation"])
    elif name == ev.GenerationFinished.NAME:
        for key, metric in (("validation", "validation/current"), ("train_current", "train/current")):
            if _number(event.get(key)) is not None:
                out[metric] = float(event[key])
        if _number(event.get("train_candidate")) is not None:
            out["train/candidate"] = float(event["train_candidate"])
    elif name == ev.EpochFinished.NAME and _number(event.get("best_validation")) is not None:
        out["validation/best"] = float(event["best_validation"])
    elif name == ev.TestEvaluated.NAME:
        for which, value in (event.get("scores") or {}).items():
            if _number(value) is not None:
                out[metric_name("test", which)] = float(value)
    elif name == ev.RunFinished.NAME:
        for key in ("rollouts", "tokens", "cached_rollouts"):
            if _number(event.get(key)) is not None:
                out[metric_name("run", key)] = float(event[key])
    usage = event.get("usage")
    if isinstance(usage, dict):
        by_stage = usage.get("by_stage")
        stages = by_stage if isinstance(by_stage, dict) else usage
        for stage, numbers in stages.items():
            for key in ("tokens", "cost_usd", "calls"):
                value = numbers.get(key) if isinstance(numbers, dict) else None
                if value is not None and _number(value) is not None:
                    out[metric_name("usage", stage, key)] = float(value)
    return out


class MlflowTracker:
    """One MLflow run per harnessevolve run (found again by its run-id tag when the run resumes)."""

    def __init__(
        self,
        harness_dir: Path,
        *,
        tracking_uri: str | None = None,
        experiment: str | None = None,
        run_dir: Path | None = None,
    ) -> None:
        try:
            from mlflow import MlflowClient
        except ImportError:
            raise HarnessEvolveError(
                "MLflow tracking needs mlflow",
                field="--track",
                hint="pip install 'harnessevolve[tracking]'",
            ) from None
        self.harness_dir = Path(harness_dir)
        self.tracking_uri = tracking_uri or default_tracking_uri(self.harness_dir)
        try:
            self.client = MlflowClient(tracking_uri=self.tracking_uri)
        except Exception as exc:  # noqa: BLE001 - mlflow raises MlflowException and OS errors alike
            raise HarnessEvolveError(
                f"cannot open the MLflow store {self.tracking_uri}: {str(exc).splitlines()[0][:300]}",
                field="--track",
                hint="check MLFLOW_TRACKING_URI (a file: store also needs MLFLOW_ALLOW_FILE_STORE=true)",
            ) from None
        self.experiment_name = (
            experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or f"harnessevolve-{self.harness_dir.name}"
        )
        self.run_id: str | None = None
        self.run_dir = run_dir
        """Where the run's ledger and gate reports are (artifacts at the end); default: beside the harness."""
        self.accepted = 0
        self.not_kept = 0
        self.broken = False

    # -- the Tracker protocol -------------------------------------------------------------
    def on_event(self, event: dict[str, Any]) -> None:
        if self.broken:
            return
        try:
            self._record(event)
        except Exception as exc:  # noqa: BLE001 - tracking must never stop a run
            self.broken = True
            log.warning("MLflow tracking stopped after an error (the run goes on): %s", exc)

    def close(self) -> None:
        self.run_id = None

    # -- mapping ----------------------------------------------------------------------------
    def _experiment_id(self) -> str:
        found = self.client.get_experiment_by_name(self.experiment_name)
        if found is not None:
            return found.experiment_id
        artifacts = None
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            artifacts = (self.harness_dir / STATE_DIR / "mlruns").resolve().as_uri()
        return self.client.create_experiment(self.experiment_name, artifact_location=artifacts)

    def _open(self, event: dict[str, Any]) -> str | None:
        """The MLflow run for this run: a new one, or on ``run_resumed`` the one made before; ``None``
        when a finished run is replayed a second time (it is tracked already)."""
        from mlflow.entities import Param, RunTag

        run_id = str(event.get("run_id") or (self.run_dir.name if self.run_dir else ""))
        experiment = self._experiment_id()
        if self.run_dir is None and run_id:
            self.run_dir = self.harness_dir / STATE_DIR / "runs" / run_id
        if run_id:
            existing = self.client.search_runs(
                [experiment], filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'", max_results=1
            )
            if existing and event.get("event") == ev.RunResumed.NAME:
                self.client.update_run(existing[0].info.run_id, status="RUNNING")
                return existing[0].info.run_id
            if existing:
                log.warning("run %s is tracked in MLflow already (%s)", run_id, existing[0].info.run_id)
                return None
        tags = {RUN_ID_TAG: run_id, "harnessevolve.benchmark": str(event.get("benchmark", ""))}
        run = self.client.create_run(experiment, run_name=run_id or None, tags=tags)
        params = {
            "benchmark": event.get("benchmark"),
            "seed_rev": event.get("rev"),
            "gates": event.get("gates"),
        }
        params.update({f"options.{k}": v for k, v in (event.get("options") or {}).items()})
        self.client.log_batch(
            run.info.run_id,
            params=[Param(k, str(v)[:6000]) for k, v in params.items() if v is not None],
            tags=[RunTag("harnessevolve.harness", str(event.get("harness", "")))],
        )
        return run.info.run_id

    def _record(self, event: dict[str, Any]) -> None:
        from mlflow.entities import Metric, RunTag

        name = event.get("event")
        if self.run_id is None:
            if name not in (ev.RunStarted.NAME, ev.RunResumed.NAME):
                return
            self.run_id = self._open(event)
            if self.run_id is None:
                self.broken = True
                return
        generation = event.get("generation")
        step = generation if isinstance(generation, int) else 0
        metrics = event_metrics(event)
        if name == ev.CandidateAccepted.NAME:
            self.accepted += 1
            metrics["candidates/accepted"] = float(self.accepted)
        elif name in (ev.CandidateReverted.NAME, ev.CandidateRejected.NAME):
            self.not_kept += 1
            metrics["candidates/not_kept"] = float(self.not_kept)
        stamp = int(time.time() * 1000)
        tags = [RunTag("harnessevolve.last_event", str(name))]
        if name == ev.CandidateAccepted.NAME and event.get("sha"):
            tags.append(RunTag("harnessevolve.head", str(event["sha"])))
        self.client.log_batch(
            self.run_id, metrics=[Metric(k, v, stamp, step) for k, v in metrics.items()], tags=tags
        )
        if name in END_STATUS:
            self._finish(END_STATUS[name])

    def _finish(self, status: str) -> None:
        assert self.run_id is not None
        if self.run_dir is not None:
            for artifact in ("ledger.jsonl", "report.html"):
                if (self.run_dir / artifact).is_file():
                    self.client.log_artifact(self.run_id, str(self.run_dir / artifact))
            if (self.run_dir / "gates").is_dir() and any((self.run_dir / "gates").iterdir()):
                self.client.log_artifacts(self.run_id, str(self.run_dir / "gates"), "gates")
        self.client.set_terminated(self.run_id, status)
        self.run_id = None


TRACKERS = {"mlflow": MlflowTracker}


def make_tracker(
    kind: str | None, harness_dir: Path, *, tracking_uri: str | None = None, run_dir: Path | None = None
) -> Tracker:
    """``None``/``"none"``: a tracker that does nothing; ``"mlflow"``: :class:`MlflowTracker`."""
    if kind in (None, "", "none", "off"):
        return NullTracker()
    if kind not in TRACKERS:
        raise HarnessEvolveError(
            f"unknown tracker {kind!r}", field="--track", hint=f"use one of: none, {', '.join(TRACKERS)}"
        )
    return TRACKERS[kind](harness_dir, tracking_uri=tracking_uri, run_dir=run_dir)


def mirror_run(tracker: Tracker, events: list[dict[str, Any]]) -> None:
    """Replay a run's ledger into a tracker (a finished run tracked after the fact)."""
    for event in events:
        tracker.on_event(event)
    tracker.close()
