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
from collections.abc import Iterable
from functools import singledispatch
from pathlib import Path
from typing import Any, Protocol

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.runs import events as ev
from harnessevolve.runs.rundir import STATE_DIR, RunDir

log = logging.getLogger(__name__)
RUN_ID_TAG = "harnessevolve.run_id"
END_STATUS = {ev.RunFinished.NAME: "FINISHED", ev.RunFailed.NAME: "FAILED", ev.RunInterrupted.NAME: "KILLED"}


class Tracker(Protocol):
    """Receives every ledger event as written (its typed record), in order.

    ``on_event`` must return quickly and never raise; ``close`` flushes and ends the tracked run.
    """

    def on_event(self, event: ev.Event) -> None: ...

    def close(self) -> None: ...


class NullTracker:
    def on_event(self, event: ev.Event) -> None:
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


def _numbers(pairs: Iterable[tuple[str, Any]]) -> dict[str, float]:
    """The pairs whose value is a number (not a bool), as floats."""
    return {name: number for name, value in pairs if (number := _number(value)) is not None}


@singledispatch
def _own_metrics(event: ev.Event) -> dict[str, float]:
    """The numbers an event of this type contributes (none, unless registered below)."""
    return {}


@_own_metrics.register
def _(e: ev.Baseline) -> dict[str, float]:
    return {"validation/current": float(e.score)} if _number(e.score) is not None else {}


@_own_metrics.register
def _(e: ev.BatchEvaluated) -> dict[str, float]:
    out = {"train/current": float(e.score or 0.0), "train/failed": float(e.failed or 0)}
    for cluster in e.clusters:
        out[metric_name("cluster", cluster.cause)] = float(cluster.size or 0)
    return out


@_own_metrics.register(ev.GateVerdicts)
@_own_metrics.register(ev.CandidateRejected)
def _(e: ev.GateVerdicts | ev.CandidateRejected) -> dict[str, float]:
    out: dict[str, float] = {}
    for verdict in e.verdicts or []:
        out[metric_name("gate", verdict.gate, "passed")] = 1.0 if verdict.passed else 0.0
        for key, value in verdict.numbers.items():
            if _number(value) is not None:
                out[metric_name("gate", verdict.gate, key)] = float(value)
    return out


@_own_metrics.register
def _(e: ev.CandidateAccepted) -> dict[str, float]:
    return _numbers((("validation/candidate", e.validation),))


@_own_metrics.register
def _(e: ev.GenerationFinished) -> dict[str, float]:
    pairs = (
        ("validation/current", e.validation),
        ("train/current", e.train_current),
        ("train/candidate", e.train_candidate),
    )
    return _numbers(pairs)


@_own_metrics.register
def _(e: ev.EpochFinished) -> dict[str, float]:
    return _numbers((("validation/best", e.best_validation),))


@_own_metrics.register
def _(e: ev.TestEvaluated) -> dict[str, float]:
    return _numbers((metric_name("test", k), v) for k, v in e.scores.items())


@_own_metrics.register
def _(e: ev.RunFinished) -> dict[str, float]:
    pairs = (("rollouts", e.rollouts), ("tokens", e.tokens), ("cached_rollouts", e.cached_rollouts))
    return _numbers((metric_name("run", k), v) for k, v in pairs)


def event_metrics(event: ev.Event) -> dict[str, float]:
    """The numbers an event contributes, keyed by metric name (step: its generation): its own
    (dispatch on its type), then the usage snapshot it carries."""
    out = _own_metrics(event)
    spent = getattr(event, "usage", None)
    if isinstance(spent, dict):
        by_stage = spent.get("by_stage")
        stages = by_stage if isinstance(by_stage, dict) else spent
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
    def on_event(self, event: ev.Event) -> None:
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

    def _open(self, event: ev.RunStarted | ev.RunResumed) -> str | None:
        """The MLflow run for this run: a new one, or on ``run_resumed`` the one made before; ``None``
        when a finished run is replayed a second time (it is tracked already)."""
        from mlflow.entities import Param, RunTag

        run_id = str(event.run_id or (self.run_dir.name if self.run_dir else ""))
        experiment = self._experiment_id()
        if self.run_dir is None and run_id:
            self.run_dir = self.harness_dir / STATE_DIR / "runs" / run_id
        if run_id:
            existing = self.client.search_runs(
                [experiment], filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'", max_results=1
            )
            if existing and isinstance(event, ev.RunResumed):
                self.client.update_run(existing[0].info.run_id, status="RUNNING")
                return existing[0].info.run_id
            if existing:
                log.warning("run %s is tracked in MLflow already (%s)", run_id, existing[0].info.run_id)
                return None
        started = event if isinstance(event, ev.RunStarted) else None
        benchmark = started.benchmark if started else ""
        tags = {RUN_ID_TAG: run_id, "harnessevolve.benchmark": benchmark}
        run = self.client.create_run(experiment, run_name=run_id or None, tags=tags)
        params: dict[str, Any] = {
            "benchmark": started.benchmark if started else None,
            "seed_rev": event.rev,
            "gates": started.gates if started else None,
        }
        params.update({f"options.{k}": v for k, v in (started.options if started else {}).items()})
        self.client.log_batch(
            run.info.run_id,
            params=[Param(k, str(v)[:6000]) for k, v in params.items() if v is not None],
            tags=[RunTag("harnessevolve.harness", started.harness if started else "")],
        )
        return run.info.run_id

    def _record(self, event: ev.Event) -> None:
        from mlflow.entities import Metric, RunTag

        name = event.event_name
        if self.run_id is None:
            if not isinstance(event, ev.RunStarted | ev.RunResumed):
                return
            self.run_id = self._open(event)
            if self.run_id is None:
                self.broken = True
                return
        generation = getattr(event, "generation", None)
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
        if isinstance(event, ev.CandidateAccepted) and event.sha:
            tags.append(RunTag("harnessevolve.head", event.sha))
        self.client.log_batch(
            self.run_id, metrics=[Metric(k, v, stamp, step) for k, v in metrics.items()], tags=tags
        )
        if name in END_STATUS:
            self._finish(END_STATUS[name])

    def _finish(self, status: str) -> None:
        assert self.run_id is not None
        if self.run_dir is not None:
            for artifact in (RunDir(self.run_dir).ledger.name, "report.html"):
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


def mirror_run(tracker: Tracker, events: list[ev.Event]) -> None:
    """Replay a run's ledger into a tracker (a finished run tracked after the fact)."""
    for event in events:
        tracker.on_event(event)
    tracker.close()
