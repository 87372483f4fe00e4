"""GRPO-style policy gradient: rollouts grouped by task, advantages normalised within each group.

For task g with rewards r_1..r_n, each rollout's advantage is ``(r_i - mean(r)) / (std(r) + eps)``
(population std). Groups smaller than ``min_group`` or with equal rewards carry no signal and are
dropped. The loss is ``-sum_i A_i * sum_t log p(y_t) / (generated tokens)`` over the generated
tokens only: with one update per batch of rollouts the PPO ratio is 1 and its clipping never
triggers, so this is GRPO's gradient without the ratio bookkeeping (and with the token-level mean
of Dr. GRPO / DAPO rather than a per-sequence mean, so long replies are not down-weighted).

A "group" is every rollout of the task the data holds: in a run, the same task under the harness
revisions the run scored (different prompts, same task and checker), plus the reference trajectory
with reward 1 when ``include_references``. That is looser than GRPO's same-prompt groups; the
advantage still says which attempts at the task did better than the others.

Optional KL penalty (``kl_coef`` > 0, off by default): the k3 estimator
``exp(ref - logp) - (ref - logp) - 1`` on generated tokens against the frozen starting model; with
LoRA the reference is the same model with its adapters disabled, otherwise a frozen copy.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from harnessevolve.train.samples import Sample


def group_advantages(rewards_by_group: dict[str, list[float]], eps: float = 1e-6) -> dict[str, list[float]]:
    """Per group, ``(r - mean) / (std + eps)`` (population std; 0 for a group of equal rewards)."""
    out: dict[str, list[float]] = {}
    for group, rewards in rewards_by_group.items():
        mean = sum(rewards) / len(rewards)
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
        out[group] = [(r - mean) / (std + eps) if std > 0 else 0.0 for r in rewards]
    return out


def grpo_samples(samples: Sequence[Sample], *, eps: float = 1e-6, min_group: int = 2) -> list[Sample]:
    """The samples of tasks whose group has at least ``min_group`` members and unequal rewards, each
    carrying its normalised advantage."""
    groups: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        groups[sample.task_id].append(sample)
    advantages = group_advantages({g: [s.reward for s in members] for g, members in groups.items()}, eps)
    out = []
    for group, members in groups.items():
        if len(members) < min_group or len({s.reward for s in members}) < 2:
            continue
        out += [replace(s, advantage=a) for s, a in zip(members, advantages[group], strict=True)]
    return out


class KLReference:
    """Log-probs of the frozen starting model, for the KL penalty."""

    def __init__(self, model: Any, lora: bool) -> None:
        self.lora = lora
        self.frozen = None if lora else copy.deepcopy(model).eval().requires_grad_(False)
        self.model = model

    @contextlib.contextmanager
    def _reference(self) -> Iterator[Any]:
        if self.lora:
            with self.model.disable_adapter():
                yield self.model
        else:
            yield self.frozen

    def logprobs(self, batch: dict[str, Any]) -> Any:
        import torch

        from harnessevolve.train.policy import token_logprobs

        with torch.no_grad(), self._reference() as reference:
            logp, _mask = token_logprobs(reference, batch)
        return logp


def k3_kl(logp: Any, ref_logp: Any, mask: Any) -> Any:
    """Mean over generated tokens of ``exp(ref - logp) - (ref - logp) - 1`` (>= 0, unbiased for KL)."""
    import torch

    delta = ref_logp - logp
    kl = torch.exp(delta) - delta - 1.0
    return (kl * mask).sum() / mask.sum().clamp(min=1.0)
