"""Ties are not gains: a performance pass on a tie with no validation gain is refused by default;
a validation gain keeps it; ``accept_ties`` (the shipped ``gates/paper.yaml``) restores the paper's rule."""

from __future__ import annotations

from pathlib import Path

from harnessevolve.gate.config import HeldoutConfig, PerformanceConfig, load_gate_config
from harnessevolve.gate.performance import heldout_gate, performance_gate, refuse_tie

TIED = [1.0, 0.0, 0.0, 1.0]


def test_a_tie_without_validation_gain_is_refused() -> None:
    config = PerformanceConfig()
    perf = performance_gate(TIED, TIED, [], config)
    assert perf.passed and perf.numbers["tie"]
    flat = heldout_gate([0.0, 1.0], [0.0, 1.0], HeldoutConfig())
    refused = refuse_tie(perf, flat, config)
    assert not refused.passed and refused.gate == "performance" and refused.numbers["tie_refused"]
    assert refused.reason.startswith("refused as a tie: ") and "validation (0.500 -> 0.500)" in refused.reason
    assert "ties are not gains by default" in refused.reason and "accepts them" not in refused.reason
    gained = heldout_gate([0.0, 0.0], [0.0, 1.0], HeldoutConfig())
    assert refuse_tie(perf, gained, config) is perf  # the validation gain is evidence
    assert refuse_tie(perf, flat, PerformanceConfig(accept_ties=True)) is perf


def test_a_real_gain_or_a_loss_is_left_alone() -> None:
    config = PerformanceConfig()
    flat = heldout_gate([0.0], [0.0], HeldoutConfig())
    win = performance_gate([0.0, 0.0], [1.0, 0.0], [], config)
    assert refuse_tie(win, flat, config) is win
    loss = performance_gate([1.0, 0.0], [0.0, 0.0], [], config)
    assert refuse_tie(loss, flat, config) is loss and not loss.passed


def test_shipped_gate_files() -> None:
    assert load_gate_config().performance.accept_ties is False
    paper = load_gate_config(Path("paper"))
    assert paper.performance.accept_ties is True and paper.source.endswith("paper.yaml")
