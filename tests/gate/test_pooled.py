"""``performance.mode: pooled`` (gates/pooled.yaml): one exact sign test over the paired outcomes of
the batch, the recent batches and validation; its decisions pinned at the boundaries, and a run
that uses it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.gate.config import PerformanceConfig, load_gate_config
from harnessevolve.gate.noise import (
    Pair,
    decide_pooled,
    mcnemar_p_value,
    pooled_hopeless,
    pooled_p_value_at_best,
    unopposed_bound,
)
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
    config = PerformanceConfig(pooled_alpha=alpha, accept_unopposed=False)
    decision = decide_pooled({"batch": pairs("b", wins, losses, 3)}, config)
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


@pytest.mark.parametrize(
    ("evidence", "accepted", "unopposed"),
    [
        ({"batch": (1, 0, 7)}, True, True),  # a temperature-0 fix of one task: one win, ties elsewhere
        ({"batch": (1, 0, 7), "validation": (0, 0, 8)}, True, True),
        ({"batch": (0, 0, 8), "recent": (0, 0, 16), "validation": (1, 0, 7)}, True, True),
        ({"batch": (1, 0, 7), "recent": (0, 1, 15)}, False, False),  # one loss anywhere: the sign test
        ({"batch": (2, 0, 6), "validation": (0, 1, 7)}, False, False),  # 2-1: p 0.5
        ({"batch": (4, 0, 4), "recent": (0, 1, 15)}, True, False),  # 4-1: p 0.1875 <= 0.2
        ({"batch": (0, 0, 8), "validation": (0, 0, 8)}, False, False),  # ties only: no evidence
        ({"batch": (3, 0, 5)}, True, False),  # p 0.125: the sign test accepts, not the unopposed rule
    ],
)
def test_the_default_also_keeps_one_win_with_no_loss_and_says_so(
    evidence: dict[str, tuple[int, int, int]], accepted: bool, unopposed: bool
) -> None:
    config = load_gate_config().performance
    decision = decide_pooled({k: pairs(k[0], *v) for k, v in evidence.items()}, config)
    assert decision.accepted is accepted
    assert decision.numbers.get("unopposed", False) is unopposed
    if unopposed:
        tasks = sum(sum(v) for v in evidence.values())
        assert decision.numbers["unopposed_bound"] == pytest.approx(unopposed_bound(tasks), abs=1e-4)
        assert "no loss" in decision.reason and "unopposed" in decision.reason
    strict = decide_pooled(
        {k: pairs(k[0], *v) for k, v in evidence.items()}, load_gate_config(Path("pooled")).performance
    )
    assert strict.accepted is (accepted and not unopposed)  # gates/pooled.yaml: the sign test alone


def test_the_unopposed_bound_is_the_worst_case_over_flip_rates() -> None:
    """P(no loss, at least one win) for a no-better candidate that flips each task with rate q
    (a win or a loss, even odds) is (1 - q/2)^n - (1 - q)^n; the bound is its maximum over q."""
    for n in (1, 2, 8, 24, 40, 200):
        grid = max((1 - q / 2) ** n - (1 - q) ** n for q in (i / 10_000 for i in range(1, 10_001)))
        assert unopposed_bound(n) == pytest.approx(grid, abs=1e-4)
    assert 0.25 < unopposed_bound(40) < 0.26 and unopposed_bound(0) == 0.0


def test_validation_is_scored_while_an_unopposed_win_is_still_reachable() -> None:
    default = load_gate_config().performance
    assert not pooled_hopeless(0, 0, 8, default)  # all ties so far: a validation win would pass
    assert pooled_hopeless(0, 0, 8, replace(default, accept_unopposed=False)) is False  # 8-0 reaches p
    assert pooled_hopeless(0, 1, 2, default)  # a loss is in and 2-1 cannot reach p 0.2
    assert pooled_hopeless(0, 0, 0, default)  # nothing to score and no win: nothing can pass


def test_the_shipped_pooled_gates_file() -> None:
    config = load_gate_config(Path("pooled"))
    assert config.performance.mode == "pooled" and config.performance.pooled_alpha == 0.2
    assert config.performance.accept_unopposed is False  # the sign test alone
    assert load_gate_config().performance.mode == "pooled"  # the default, with the unopposed rule


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
