"""Gate thresholds from ``gates/*.yaml`` (schema ``gates.schema.json``); unknown keys are errors.

Defaults are HarnessEvolve's published values; the noise-aware performance mode is opt-in
(``performance.mode: sequential``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harnessevolve.core import paths
from harnessevolve.core.errors import GateConfigError
from harnessevolve.core.files import read_yaml
from harnessevolve.core.schema import check


@dataclass(frozen=True)
class QualityConfig:
    max_prompt_chars: int = 16000
    """Cap on the assembled system prompt (prompt bloat)."""
    max_new_examples: int = 5
    """In-context examples one edit may add."""
    max_prompt_tokens: int = 4000
    """Cap on the assembled system prompt in the agent model's tokens."""


@dataclass(frozen=True)
class LeakageConfig:
    threshold: float = 0.8
    """Reject when any protected task's leakage score (0-1) reaches this (HarnessEvolve: 0.8)."""
    ngram: int = 8
    """Word n-gram length for instruction overlap; shorter instructions must appear whole."""
    min_answer_chars: int = 4
    """Answers shorter than this ('12', 'yes') are never matched: they would block every edit."""
    allow_train_demonstrations: bool = True
    """Train tasks may be embedded (the ``demo`` proposer adds their reference runs as examples);
    validation and test tasks never may. ``false`` protects every split."""
    judge_model: str | None = None
    """Also ask this model (any litellm name) to score leakage 0-1 against ``threshold``."""
    judge_max_tasks: int = 10
    """How many of the most similar protected tasks the judge sees."""


@dataclass(frozen=True)
class PerformanceConfig:
    mode: Literal["fixed", "sequential", "pooled"] = "pooled"
    """pooled (the default): one decision over the paired outcomes of the batch, the recent batches
    and validation; fixed: HarnessEvolve's rule on one batch (gates/fixed.yaml); sequential: a paired
    sequential test (gate/noise.py)."""
    min_gain: float = 0.0
    """fixed mode, delta: the candidate's batch score minus the current harness's must be at least this."""
    max_recent_drop: float = 0.025
    """epsilon: the worst allowed drop on each of the previous batches (both modes)."""
    recent_batches: int = 2
    """R: how many previous batches are re-checked (both modes)."""
    confidence: float = 0.99
    """Level of the reported confidence intervals; in sequential mode P(accepting a candidate
    that is no better) <= 1 - confidence, exactly (Ville's inequality)."""
    power: float = 0.95
    """sequential: the aimed-at probability of accepting a candidate that gains ``effect``."""
    effect: float = 0.1
    """sequential: the gain (score points) the test is designed to detect with ``power``."""
    increment: int = 10
    """sequential: tasks scored (for both harnesses) between two looks at the evidence."""
    max_rollouts_per_task: int = 32
    """sequential: repetitions per task before the gate gives up (and rejects); stochastic
    harnesses only: at temperature 0 every task is run once."""
    pooled_alpha: float = 0.2
    """pooled: P(accepting a candidate no better than the current harness) <= this, exactly (a
    one-sided sign test over every discordant pair of the batch, the recent batches and validation)."""
    accept_unopposed: bool = True
    """pooled: also accept a candidate that wins at least one pair and loses none (a temperature-0
    fix of one task); such a no-better candidate passes at most ~25% of the time (stated in the
    verdict). False: the sign test alone."""
    accept_ties: bool = False
    """fixed mode: keep a candidate that ties on its batch (gain 0) and gains nothing on validation.
    Off by default (a tie is no evidence of a gain); HarnessEvolve's rule accepts it
    (``gates/paper.yaml``)."""


@dataclass(frozen=True)
class HeldoutConfig:
    split: str = "validation"
    max_drop: float = 0.025
    """epsilon: the worst allowed drop of the validation score."""
    require_control: bool = False
    """``gate --split test``: fail unless the candidate beats the baseline's best-of-k (the
    self-consistency pick) at the rollouts its run spent (the matched-budget control)."""


@dataclass(frozen=True)
class GateConfig:
    source: str = "(defaults)"
    quality: QualityConfig = field(default_factory=QualityConfig)
    leakage: LeakageConfig = field(default_factory=LeakageConfig)
    performance: PerformanceConfig = field(default_factory=PerformanceConfig)
    heldout: HeldoutConfig = field(default_factory=HeldoutConfig)


MODE_KEYS = {"pooled": {"min_gain", "max_recent_drop", "accept_ties"}}
"""Keys a gates file may not set under a mode that ignores them (a file without ``mode`` is pooled:
``min_gain`` there would silently do nothing)."""


def builtin_gates(name: str) -> Path | None:
    """A shipped gates file named without folder or suffix (``paper`` -> ``gates/paper.yaml``)."""
    if "/" in name or name.endswith((".yaml", ".yml")):
        return None
    found = paths.builtin_dir("gates") / f"{name}.yaml"
    return found if found.is_file() else None


def load_gate_config(path: Path | None = None) -> GateConfig:
    """``None`` -> the built-in ``gates/default.yaml`` when present, else the defaults. A name that
    is no file (``paper``) is a shipped gates file (``gates/paper.yaml``)."""
    if path is not None and not Path(path).exists():
        path = builtin_gates(str(path)) or path
    if path is None:
        default = paths.builtin_dir("gates") / "default.yaml"
        if not default.is_file():
            return GateConfig()
        path = default
    doc = read_yaml(Path(path), error=GateConfigError)
    check(doc, "gates", file=str(path), error=GateConfigError)
    performance = PerformanceConfig(**doc.get("performance", {}))
    ignored = sorted(set(doc.get("performance", {})) & MODE_KEYS.get(performance.mode, set()))
    if ignored:
        raise GateConfigError(
            f"'{ignored[0]}' has no effect in performance.mode {performance.mode}",
            file=str(path),
            field=f"performance.{ignored[0]}",
            hint="set performance.mode: fixed for HarnessEvolve's per-batch rule (gates/fixed.yaml), "
            "or remove the key",
        )
    if performance.power <= 1 - performance.confidence:
        raise GateConfigError(
            f"power {performance.power} must exceed 1 - confidence ({1 - performance.confidence:.3g})",
            file=str(path),
            field="performance.power",
            hint="e.g. confidence: 0.95 with power: 0.8",
        )
    return GateConfig(
        source=str(path),
        quality=QualityConfig(**doc.get("quality", {})),
        leakage=LeakageConfig(**doc.get("leakage", {})),
        performance=performance,
        heldout=HeldoutConfig(**doc.get("heldout", {})),
    )
