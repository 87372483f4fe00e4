"""``performance.mode: pooled`` (gates/pooled.yaml): one exact sign test over the paired outcomes of
the batch, the recent batches and validation; its decisions pinned at the boundaries, and a run
that uses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.gate.config import PerformanceConfig, load_gate_config
from harnessevolve.gate.noise import Pair, decide_pooled, mcnemar_p_value, pooled_p_value_at_best
from harnessevolve.gate.performance import performance_gate


def pairs(prefix: str, wins: int, losses: int, ties: int = 0) -> list[Pair]:
    out = [Pair(f"{prefix}w{i}", 0.0, 1.0) for i in range(wins)]
    out += [Pair(f"{prefix}l{i}", 1.0, 0.0) for i in range(losses)]
    return out + [Pair(f"{prefix}t{i}", 1.0, 1.0) for i in range(ties)]


@pytest.mark.parametrize(
    ("wins", "losses", "alpha", "accepted"),
    [
        (2, 0, 0.25, True),  # p = 1/4: at the boundary
        (2, 0, 0.2, False),  # p = 1/4 > 0.2
        (3, 0, 0.2, True),  # p = 1/8
        (4, 1, 0.2, True),  # p = 6/32 = 0.1875
        (3, 1, 0.2, False),  # p = 5/16
        (1, 1, 0.5, False),  # no more wins than losses, whatever alpha
        (0, 0, 0.5, False),  # ties only: no evidence
    ],
)
def test_decisions_at_the_boundaries(wins: int, losses: int, alpha: float, accepted: bool) -> None:
    decision = decide_pooled({"batch": pairs("b", wins, losses, 3)}, PerformanceConfig(pooled_alpha=alpha))
    assert decision.accepted is accepted
    assert decision.numbers["p_value"] == pytest.approx(mcnemar_p_value(wins, losses), abs=1e-4)
    assert decision.numbers["mode"] == "pooled" and decision.numbers["ties"] == 3


def test_one_flip_on_an_earlier_batch_no_longer_vetoes_a_candidate_that_won_elsewhere() -> None:
    config = PerformanceConfig(pooled_alpha=0.2)
    batch, recent, validation = pairs("b", 2, 0, 6), pairs("r", 0, 1, 15), pairs("v", 2, 0, 6)
    # the fixed rule: a one-task drop on an 8-task batch is 0.125 > 0.025 and vetoes the candidate
    fixed = performance_gate(
        [p.current for p in batch], [p.candidate for p in batch], [([1.0] + [0.0] * 7, [0.0] * 8)], config
    )
    assert not fixed.passed and fixed.reason.startswith("drop 0.125 on a previous batch")
    pooled = decide_pooled({"batch": batch, "recent": recent, "validation": validation}, config)
    assert pooled.accepted  # 4 wins, 1 loss: p = 0.1875
    assert pooled.numbers["sources"] == {
        "batch": {"wins": 2, "losses": 0, "ties": 6},
        "recent": {"wins": 0, "losses": 1, "ties": 15},
        "validation": {"wins": 2, "losses": 0, "ties": 6},
    }
    assert "batch 2W/0L, recent 0W/1L, validation 2W/0L" in pooled.reason
    worse = decide_pooled({"batch": batch, "recent": pairs("r", 0, 2, 14), "validation": validation}, config)
    assert not worse.accepted and "p 0.344 > 0.2" in worse.reason


def test_validation_is_skipped_only_when_no_outcome_of_it_could_accept() -> None:
    assert pooled_p_value_at_best(0, 3, 4) == mcnemar_p_value(4, 3)  # 0.5: hopeless at 0.2
    assert pooled_p_value_at_best(1, 0, 8) == mcnemar_p_value(9, 0)  # tiny: validation can decide


def test_the_shipped_pooled_gates_file() -> None:
    config = load_gate_config(Path("pooled"))
    assert config.performance.mode == "pooled" and config.performance.pooled_alpha == 0.2
    assert load_gate_config().performance.mode == "fixed"  # the default is unchanged


def test_a_run_with_the_pooled_gate_weighs_batch_and_validation_together(
    cli, harness_dir: Path, learner: str
) -> None:
    done = cli.invoke(app, run_args(harness_dir, learner, "--gates", "pooled", generations=2, batch_size=8))
    assert done.exit_code in (0, 1), done.output
    [ledger] = (harness_dir / ".harnessevolve" / "runs").glob("*/ledger.jsonl")
    verdicts = [json.loads(line) for line in ledger.read_text().splitlines() if '"gate_verdicts"' in line]
    assert verdicts
    perf = [v for e in verdicts for v in e["verdicts"] if v["gate"] == "performance"]
    assert perf and all(v["numbers"]["mode"] == "pooled" for v in perf)
    for verdict in perf:
        sources = verdict["numbers"]["sources"]
        assert "batch" in sources
        assert "validation" in sources or verdict["numbers"].get("validation_skipped")
