"""The optimisation loop shared by both modes: batches of weighted samples, AdamW, clipped gradients."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from harnessevolve.train.config import TrainConfig
from harnessevolve.train.grpo import KLReference, k3_kl
from harnessevolve.train.policy import Policy, collate, token_logprobs
from harnessevolve.train.rft import weighted_nll
from harnessevolve.train.samples import Sample


@dataclass(frozen=True)
class FitResult:
    loss_before: float
    """Mean loss on the evaluation samples before the first step."""
    loss_after: float
    """The same, after the last step."""
    loss_curve: tuple[float, ...]
    """The training loss of each step's batch."""
    tokens: int
    """Sequence tokens processed by the training steps (padding excluded)."""
    trained_tokens: int
    """Of those, the generated tokens the loss was on."""
    seconds: float
    """Wall time of the training steps (loading and evaluation excluded)."""

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def batches(samples: Sequence[Sample], size: int, steps: int, seed: int) -> Iterator[list[Sample]]:
    """``steps`` batches cycling through ``samples``, reshuffled (seeded) every pass."""
    rng = random.Random(seed)
    order: list[Sample] = []
    for _ in range(steps):
        batch: list[Sample] = []
        while len(batch) < min(size, len(samples)):
            if not order:
                order = list(samples)
                rng.shuffle(order)
            batch.append(order.pop())
        yield batch


def batch_loss(
    policy: Policy, samples: Sequence[Sample], config: TrainConfig, kl: KLReference | None
) -> object:
    import torch

    batch = collate(samples, policy.tokenizer.pad_token_id, policy.device)
    weights = torch.tensor([s.advantage for s in samples], dtype=torch.float32, device=policy.device)
    with policy.autocast(config):
        logp, mask = token_logprobs(policy.model, batch)
        loss = weighted_nll(logp, mask, weights)
        if kl is not None:
            loss = loss + config.kl_coef * k3_kl(logp, kl.logprobs(batch), mask)
    return loss


def evaluate_loss(policy: Policy, samples: Sequence[Sample], config: TrainConfig) -> float:
    """The loss (without KL) over ``samples``, token-weighted across batches, without gradients."""
    import torch

    policy.model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(samples), config.batch_size):
            chunk = samples[start : start + config.batch_size]
            n = sum(s.trained_tokens - (s.loss_mask[0] if s.loss_mask else 0) for s in chunk)
            total += float(batch_loss(policy, chunk, config, None)) * n  # type: ignore[arg-type]
            tokens += n
    return total / tokens if tokens else 0.0


def fit(
    policy: Policy,
    samples: Sequence[Sample],
    config: TrainConfig,
    *,
    on_step: Callable[[int, float], None] | None = None,
) -> FitResult:
    """Train ``policy`` in place for ``config.steps`` steps on ``samples``."""
    import torch

    torch.manual_seed(config.seed)
    eval_set = list(samples)
    random.Random(config.seed).shuffle(eval_set)
    eval_set = eval_set[: config.eval_samples]
    before = evaluate_loss(policy, eval_set, config)
    kl = KLReference(policy.model, policy.lora) if config.kl_coef > 0 else None
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    policy.model.train()
    curve: list[float] = []
    tokens = trained = 0
    seconds = 0.0
    for step, batch in enumerate(batches(samples, config.batch_size, config.steps, config.seed), 1):
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = batch_loss(policy, batch, config, kl)
        loss.backward()  # type: ignore[attr-defined]
        if config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        optimizer.step()
        if policy.device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds += time.perf_counter() - started
        value = float(loss.detach())  # type: ignore[attr-defined]
        curve.append(round(value, 5))
        tokens += sum(len(s.input_ids) for s in batch)
        trained += sum(s.trained_tokens for s in batch)
        if on_step is not None:
            on_step(step, value)
    after = evaluate_loss(policy, eval_set, config)
    policy.model.eval()
    return FitResult(before, after, tuple(curve), tokens, trained, seconds)
