"""Entry points: train on a run's saved trajectories, or on a folder of ATIF trajectories.

A run folder (``DIR/.harnessevolve/runs/<id>/``) holds ``trajectories/<harness-hash>/<task>.json``
(with ``extra.passed`` / ``extra.score`` from the evaluation) and ``evaluations/...``. Only tasks of
the benchmark's **train** split are used: validation rollouts (the held-out gate's) and the sealed
test split (``final/``) never become training data. The benchmark's reference trajectories of train
tasks join as successes when ``config.include_references``.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harnessevolve.core import atif
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.runs import events as ev
from harnessevolve.train.checkpoint import Provenance, save_checkpoint
from harnessevolve.train.config import TrainConfig
from harnessevolve.train.errors import NoTrainingDataError, TrainError, require_train_stack
from harnessevolve.train.samples import PromptStyle, Sample, build_samples

ProgressFn = Callable[[int, float], None]


@dataclass(frozen=True)
class TrainResult:
    """What one training run produced."""

    checkpoint: Path
    model: str
    """The agent model name that serves it: ``local/torch:<checkpoint>``."""
    mode: str
    samples: int
    trained_tokens: int
    tokens: int
    loss_before: float
    loss_after: float
    seconds: float
    """Training steps only."""
    wall_s: float
    """Everything: loading, tokenising, training, saving."""
    tokens_per_s: float
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["checkpoint"] = str(self.checkpoint)
        return doc


@dataclass(frozen=True)
class TrainingData:
    """Trajectories to learn from, and where they came from."""

    rollouts: tuple[Trajectory, ...]
    references: tuple[Trajectory, ...] = ()
    style: PromptStyle = PromptStyle()
    """How rollouts without token ids are rendered (their own system prompt)."""
    reference_style: PromptStyle = PromptStyle()
    """How references are rendered (under the current harness's system prompt and tools)."""
    provenance: Provenance = Provenance()


def load_trajectory_folder(folder: Path) -> list[Trajectory]:
    """Every ``*.json`` under ``folder`` (recursively) as ATIF; invalid files raise ``TrajectoryError``."""
    if not folder.is_dir():
        raise TrainError("not a folder", file=str(folder), field="--trajectories")
    return [atif.load(p) for p in sorted(folder.rglob("*.json")) if p.name != "regret.json"]


def _ledger(run_dir: Path) -> list[ev.Event]:
    from harnessevolve.runs.rundir import RunDir

    run = RunDir(run_dir)
    if not run.exists():
        raise TrainError("not a run folder (no ledger.jsonl)", file=str(run_dir), field="--run")
    return run.events()


def _harness_styles(harness_dir: str | None) -> tuple[PromptStyle, PromptStyle, str | None]:
    """(rollout style, reference style, why the harness could not be used)."""
    from harnessevolve.harness.load import load_harness

    try:
        harness = load_harness(Path(harness_dir or ""))
    except (HarnessEvolveError, OSError) as exc:
        return PromptStyle(), PromptStyle(), f"harness not loaded ({exc}); rendered without tools"
    return (
        PromptStyle.for_harness(harness, use_its_system_prompt=False),
        PromptStyle.for_harness(harness),
        None,
    )


def run_training_data(run_dir: Path, *, with_references: bool = True) -> TrainingData:
    """A run's train-split rollouts (and the benchmark's references of train tasks)."""
    from harnessevolve.core.tasks import load_benchmark

    events = _ledger(run_dir)
    started = next((e for e in events if isinstance(e, ev.RunStarted)), None)
    revs = [rev for e in events if isinstance(rev := getattr(e, "rev", None), str) and rev]
    train_ids: set[str] = set()
    benchmark = None
    try:
        benchmark = load_benchmark(started.benchmark if started is not None else "")
        train_ids = {t.id for t in benchmark.split("train")}
    except HarnessEvolveError:
        train_ids = {t for e in events if isinstance(e, ev.BatchEvaluated) for t in e.tasks}
    rollouts = [
        t
        for p in sorted((run_dir / "trajectories").glob("*/*.json"))
        if (t := atif.load(p)).task_id in train_ids or p.stem in train_ids
    ]
    references: list[Trajectory] = []
    if with_references and benchmark is not None and benchmark.references_dir.is_dir():
        for task_id in sorted(train_ids):
            path = benchmark.references_dir / f"{task_id}.json"
            if path.is_file():
                reference = atif.load(path)
                references.append(reference.with_extra(reference=reference.extra.get("reference") or "file"))
    style, reference_style, _why = _harness_styles(started.harness if started is not None else None)
    return TrainingData(
        rollouts=tuple(rollouts),
        references=tuple(references),
        style=style,
        reference_style=reference_style,
        provenance=Provenance(
            run_id=str(started.run_id if started is not None and started.run_id else run_dir.name),
            harness_rev=revs[-1] if revs else None,
            harness_hashes=tuple(sorted({str(t.extra.get("harness_hash")) for t in rollouts})),
            source=str(run_dir),
        ),
    )


def select_samples(
    data: TrainingData, tokenizer: Any, config: TrainConfig
) -> tuple[list[Sample], dict[str, Any]]:
    """The weighted samples of the configured mode, and a summary of the data."""
    from harnessevolve.train.grpo import grpo_samples
    from harnessevolve.train.rft import rft_samples

    rollouts = build_samples(data.rollouts, tokenizer, data.style, max_len=config.max_len, origin="rollout")
    references = (
        build_samples(
            data.references, tokenizer, data.reference_style, max_len=config.max_len, origin="reference"
        )
        if config.include_references
        else []
    )
    pool = rollouts + references
    if config.mode == "rft":
        chosen = rft_samples(pool)
        why = "no successful trajectory (passed evaluation or reference) to fine-tune on"
    else:
        chosen = grpo_samples(pool, eps=config.advantage_eps, min_group=config.min_group)
        why = f"no task has {config.min_group}+ rollouts with different rewards (GRPO needs groups)"
    summary = {
        "samples": len(chosen),
        "trained_tokens": sum(s.trained_tokens for s in chosen),
        "rollouts": len(data.rollouts),
        "successful_rollouts": sum(s.passed for s in rollouts),
        "references": len(references),
        "tasks": len({s.task_id for s in chosen}),
        "recorded_token_ids": sum(s.tokenised == "recorded" for s in chosen),
        "chat_template": sum(s.tokenised == "chat_template" for s in chosen),
    }
    if not chosen:
        raise NoTrainingDataError(
            why,
            file=data.provenance.source or None,
            hint="run more generations first"
            if config.mode == "rft"
            else "use --mode rft, or collect more rollouts",
        )
    return chosen, summary


def train_on(
    data: TrainingData,
    config: TrainConfig,
    *,
    base_model: str,
    out_dir: Path,
    on_step: ProgressFn | None = None,
) -> TrainResult:
    """Train ``base_model`` on ``data`` and save the checkpoint to ``out_dir``."""
    require_train_stack(lora=config.lora)
    from harnessevolve.train.fit import fit
    from harnessevolve.train.policy import load_policy

    started = time.monotonic()
    policy = load_policy(base_model, config)
    samples, summary = select_samples(data, policy.tokenizer, config)
    result = fit(policy, samples, config, on_step=on_step)
    fit_doc = {
        "loss_before": round(result.loss_before, 5),
        "loss_after": round(result.loss_after, 5),
        "loss_curve": list(result.loss_curve),
        "seconds": round(result.seconds, 3),
        "tokens": result.tokens,
        "tokens_per_s": round(result.tokens_per_s, 1),
    }
    checkpoint = save_checkpoint(
        policy, out_dir, config=config, provenance=data.provenance, data=summary, fit=fit_doc
    )
    del policy
    gc.collect()
    return TrainResult(
        checkpoint=checkpoint,
        model=f"local/torch:{checkpoint}",
        mode=config.mode,
        samples=len(samples),
        trained_tokens=result.trained_tokens,
        tokens=result.tokens,
        loss_before=result.loss_before,
        loss_after=result.loss_after,
        seconds=result.seconds,
        wall_s=time.monotonic() - started,
        tokens_per_s=result.tokens_per_s,
        data=summary,
    )


def train_from_run(
    run_dir: Path, config: TrainConfig, *, base_model: str, out_dir: Path, on_step: ProgressFn | None = None
) -> TrainResult:
    """Train on a run's train-split rollouts (+ references); see the module doc."""
    data = run_training_data(run_dir, with_references=config.include_references)
    return train_on(data, config, base_model=base_model, out_dir=out_dir, on_step=on_step)


def train_from_trajectories(
    folder: Path | Sequence[Trajectory],
    config: TrainConfig,
    *,
    base_model: str,
    out_dir: Path,
    harness_dir: Path | None = None,
    on_step: ProgressFn | None = None,
) -> TrainResult:
    """Train on a folder of ATIF trajectories (or the trajectories themselves). Success is
    ``extra.passed`` or ``extra.reference``; GRPO groups by ``extra.task_id``. With ``harness_dir``,
    trajectories without token ids are rendered with that harness's tools prompt; references are
    rendered under its system prompt."""
    trajectories = load_trajectory_folder(folder) if isinstance(folder, Path) else list(folder)
    if harness_dir is not None:
        from harnessevolve.harness.load import load_harness

        harness = load_harness(harness_dir)
        style = PromptStyle.for_harness(harness, use_its_system_prompt=False)
        reference_style = PromptStyle.for_harness(harness)
    else:
        style = reference_style = PromptStyle()
    references = [t for t in trajectories if t.extra.get("reference")]
    data = TrainingData(
        rollouts=tuple(t for t in trajectories if not t.extra.get("reference")),
        references=tuple(references),
        style=style,
        reference_style=reference_style,
        provenance=Provenance(
            harness_hashes=tuple(sorted({str(t.extra.get("harness_hash")) for t in trajectories})),
            source=str(folder) if isinstance(folder, Path) else "",
        ),
    )
    return train_on(data, config, base_model=base_model, out_dir=out_dir, on_step=on_step)
