"""The optional policy-trainer stage (``--train-every N``): fine-tune the agent model on what the run
has collected so far, and hand back the checkpoint as the next generations' agent model.

The loop calls :func:`train_generation` after every N-th generation; it trains on the run folder's
train-split rollouts (+ the benchmark's references), saves ``<run>/checkpoints/gen-NNN/``, appends
a ``policy_trained`` event to the ledger (or ``policy_training_skipped`` when the data holds nothing
to learn from) and returns the model name to use from then on (``local/torch:<checkpoint>``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.pipeline.state import RunState
from harnessevolve.runs.events import PolicyTrained, PolicyTrainingSkipped
from harnessevolve.runs.ledger import Ledger
from harnessevolve.train.config import TrainConfig
from harnessevolve.train.errors import NoTrainingDataError, TrainError, require_train_stack

STAGE_CONFIG = TrainConfig(mode="rft", steps=8, batch_size=4, max_len=512, lr=1e-5)
"""The stage's default: a short RFT pass (minutes on 2 CPU cores for SmolLM2-135M)."""


@dataclass(frozen=True)
class TrainOutcome:
    model: str
    """The agent model for the next generations (unchanged when training was skipped)."""
    record: dict[str, Any]
    """The ledger event's fields."""

    @property
    def trained(self) -> bool:
        return self.record.get("checkpoint") is not None


def base_model_for(agent_model: str) -> str:
    """The torch-loadable name of an agent model: ``local/smollm2-135m`` -> ``smollm2-135m`` (its GGUF,
    dequantised), ``local/torch:<dir>`` -> ``<dir>``; other providers' models cannot be trained here."""
    if not agent_model.startswith("local/"):
        raise TrainError(
            f"cannot fine-tune {agent_model!r}: only local/ models have weights here",
            field="--model",
            hint="use --model local/smollm2-135m (or a local/torch:<checkpoint>) with --train-every",
        )
    return agent_model.removeprefix("local/").removeprefix("torch:")


def check_training_available(lora: bool = False) -> None:
    """Raise ``TrainUnavailableError`` (hint: pip install 'harnessevolve[train]') before a run starts."""
    require_train_stack(lora=lora)


def train_generation(
    run_dir: Path,
    state: RunState,
    *,
    agent_model: str,
    config: TrainConfig = STAGE_CONFIG,
    ledger: Ledger | None = None,
    base_model: str | None = None,
) -> TrainOutcome:
    """Train on the run so far; returns the next agent model and the ledger record.

    The weights trained are ``agent_model``'s (see :func:`base_model_for`) unless ``base_model``
    names others (a scripted agent has none: tests pass a tiny checkpoint). Checkpoints go to
    ``<run_dir>/checkpoints/gen-<state.generation>/``. A data set with nothing to learn from (no
    success, no groups) is skipped, not an error; a missing ``train`` extra raises
    ``TrainUnavailableError``.
    """
    from harnessevolve.models.torch_backend import is_torch_model, release_models
    from harnessevolve.train.session import train_from_run

    base = base_model or base_model_for(agent_model)
    out_dir = run_dir / "checkpoints" / f"gen-{state.generation:03d}"
    started = time.monotonic()
    previous_stage, state.stage = state.stage, "train"
    try:
        result = train_from_run(run_dir, config, base_model=base, out_dir=out_dir)
    except NoTrainingDataError as exc:
        skipped = PolicyTrainingSkipped(generation=state.generation, model=agent_model, skipped=exc.message)
        if ledger is not None:
            ledger.append(skipped)
        return TrainOutcome(agent_model, skipped.fields())
    finally:
        state.stage = previous_stage
    if is_torch_model(agent_model):
        release_models(agent_model)  # the previous checkpoint's weights are not needed any more
    trained = PolicyTrained(
        generation=state.generation,
        mode=result.mode,
        base_model=base_model or agent_model,
        model=result.model,
        checkpoint=str(result.checkpoint),
        samples=result.samples,
        trained_tokens=result.trained_tokens,
        tokens=result.tokens,
        loss_before=round(result.loss_before, 5),
        loss_after=round(result.loss_after, 5),
        train_s=round(result.seconds, 2),
        seconds=round(time.monotonic() - started, 2),
        tokens_per_s=round(result.tokens_per_s, 1),
    )
    if ledger is not None:
        ledger.append(trained)
    return TrainOutcome(result.model, trained.fields())
