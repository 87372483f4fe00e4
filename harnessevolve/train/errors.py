"""What can go wrong when training; the CLI turns these into one line and a hint (exit 2)."""

from __future__ import annotations

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.optional import missing_module

INSTALL_HINT = "pip install 'harnessevolve[train]'"


class TrainError(HarnessEvolveError):
    """The training data or settings cannot produce a model (no samples, bad folder, bad mode)."""


class NoTrainingDataError(TrainError):
    """The trajectories hold nothing the mode can learn from (no success for RFT, no group for GRPO)."""

    exit_code = 1


class TrainUnavailableError(TrainError):
    """torch, transformers or peft is missing: the ``train`` extra is not installed."""

    default_hint = INSTALL_HINT


def require_train_stack(lora: bool = False) -> None:
    """Raise :class:`TrainUnavailableError` unless torch, transformers (and peft for LoRA) import."""
    missing = missing_module("torch", "transformers", *(("peft",) if lora else ()))
    if missing is not None:
        raise TrainUnavailableError(
            f"training needs torch, transformers and peft; '{missing}' is not installed"
        )
