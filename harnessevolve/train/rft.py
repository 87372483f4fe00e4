"""Rejection-sampling fine-tuning: maximise the likelihood of what the model generated in successful
trajectories (evaluation passed; reference trajectories count as successes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from harnessevolve.train.samples import Sample


def rft_samples(samples: Sequence[Sample]) -> list[Sample]:
    """The successful samples (evaluation passed, or a reference), each with weight 1."""
    return [replace(s, advantage=1.0) for s in samples if s.passed]


def weighted_nll(logp: Any, mask: Any, weights: Any) -> Any:
    """``-sum_i w_i * sum_t mask * logp / sum(mask)``: the token-mean negative log-likelihood of the
    generated tokens, each sequence weighted (w = 1 gives plain fine-tuning; w = advantage gives the
    on-policy policy-gradient loss GRPO uses)."""
    per_sequence = (logp * mask).sum(dim=1)
    return -(weights * per_sequence).sum() / mask.sum().clamp(min=1.0)
