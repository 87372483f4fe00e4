"""Gate thresholds from ``gates/*.yaml`` (schema ``gates.schema.json``); unknown keys are errors.

Defaults are HarnessEvolve's published values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass(frozen=True)
class PerformanceConfig:
    min_gain: float = 0.0
    """delta: the candidate's batch score minus the current harness's must be at least this."""
    max_recent_drop: float = 0.025
    """epsilon: the worst allowed drop on each of the previous batches."""
    recent_batches: int = 2
    """R: how many previous batches are re-checked."""


@dataclass(frozen=True)
class HeldoutConfig:
    split: str = "validation"
    max_drop: float = 0.025
    """epsilon: the worst allowed drop of the validation score."""


@dataclass(frozen=True)
class GateConfig:
    source: str = "(defaults)"
    quality: QualityConfig = field(default_factory=QualityConfig)
    performance: PerformanceConfig = field(default_factory=PerformanceConfig)
    heldout: HeldoutConfig = field(default_factory=HeldoutConfig)


def load_gate_config(path: Path | None = None) -> GateConfig:
    """``None`` -> the built-in ``gates/default.yaml`` when present, else the defaults."""
    if path is None:
        default = paths.builtin_dir("gates") / "default.yaml"
        if not default.is_file():
            return GateConfig()
        path = default
    doc = read_yaml(Path(path), error=GateConfigError)
    check(doc, "gates", file=str(path), error=GateConfigError)
    return GateConfig(
        source=str(path),
        quality=QualityConfig(**doc.get("quality", {})),
        performance=PerformanceConfig(**doc.get("performance", {})),
        heldout=HeldoutConfig(**doc.get("heldout", {})),
    )
