"""How a training run is set up: one frozen value, saved with every checkpoint."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from harnessevolve.train.errors import TrainError

MODES = ("rft", "grpo")


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run (``harnessevolve train`` options map onto these fields)."""

    mode: str = "rft"
    """``rft``: fine-tune on successful trajectories (rejection sampling); ``grpo``: policy gradient on
    groups of rollouts per task with per-task normalised advantages."""
    lr: float = 1e-5
    """AdamW learning rate (LoRA wants a larger one, e.g. 2e-4)."""
    steps: int = 20
    """Optimizer steps; each takes one batch, cycling through the samples (reshuffled every pass)."""
    batch_size: int = 4
    """Sequences per optimizer step (right-padded to the longest of them)."""
    max_len: int = 1024
    """Longest sequence in tokens; longer samples are cut at the end (a sample left with no generated
    token is dropped)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this (0 = no clipping)."""
    lora: bool = False
    """Train LoRA adapters (peft) instead of every weight; merged into the weights on save."""
    lora_r: int = 16
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA scaling numerator (the update is scaled by alpha / r)."""
    lora_targets: tuple[str, ...] = (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "up_proj",
        "down_proj",
        "gate_proj",
    )
    """Module names LoRA adapts (Llama-family names)."""
    device: str = "auto"
    """``auto`` (CUDA when available, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``."""
    bf16: bool = True
    """On CUDA, run forward/backward under bfloat16 autocast (weights and optimizer stay float32);
    ignored on the CPU."""
    seed: int = 0
    """Seeds torch and the sample order."""
    advantage_eps: float = 1e-6
    """GRPO: advantages are (r - mean) / (std + eps) within each task's group."""
    min_group: int = 2
    """GRPO: tasks with fewer rollouts than this carry no signal and are skipped."""
    kl_coef: float = 0.0
    """GRPO: weight of a KL penalty to the frozen starting model (k3 estimator on generated tokens).
    Off by default: it needs a second forward pass on a reference model (twice the compute, and a copy
    of the weights unless LoRA, where disabling the adapters gives the reference for free)."""
    include_references: bool = True
    """Count the benchmark's reference trajectories as successes (RFT) and as extra group members
    with reward 1 (GRPO)."""
    eval_samples: int = 32
    """Samples (at most) on which the loss is measured before and after training."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise TrainError(
                f"unknown mode {self.mode!r}", field="mode", hint=f"use one of {', '.join(MODES)}"
            )
        for name in ("steps", "batch_size", "max_len", "lora_r", "min_group"):
            if int(getattr(self, name)) < 1:
                raise TrainError(f"{name} must be at least 1", field=name)
        if self.lr <= 0:
            raise TrainError("lr must be positive", field="lr")

    @classmethod
    def tiny(cls, **overrides: Any) -> TrainConfig:
        """A configuration for tests: a few CPU steps on short sequences with a high learning rate."""
        values: dict[str, Any] = {"steps": 6, "batch_size": 2, "max_len": 512, "lr": 3e-3, "device": "cpu"}
        return cls(**{**values, **overrides})

    def with_(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes`` (``None`` values are ignored, so CLI options can pass through)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["lora_targets"] = list(self.lora_targets)
        return doc

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in doc.items() if k in known}
        if "lora_targets" in values:
            values["lora_targets"] = tuple(values["lora_targets"])
        return cls(**values)


def resolve_device(requested: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; anything else as given."""
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise TrainError("CUDA was asked for but torch sees no GPU", field="device", hint="use --device cpu")
    return requested
