"""Noise-aware performance decisions: the exact McNemar test, bootstrap intervals, the fixed rule's
numbers and the sequential gate's error control."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from itertools import product

import pytest

from harnessevolve.gate.config import HeldoutConfig, PerformanceConfig
from harnessevolve.gate.noise import (
    Decision,
    Outcome,
    Pair,
    SequentialGate,
    decide_fixed,
    mcnemar_p_value,
    paired_gain_ci,
    rollout_schedule,
)
from harnessevolve.gate.performance import heldout_gate, performance_gate, performance_verdict

SEQ = PerformanceConfig(
    mode="sequential", confidence=0.95, power=0.8, effect=0.1, increment=10, max_rollouts_per_task=8
)


# --- McNemar / sign test ----------------------------------------------------------------------------


@pytest.mark.parametrize(("wins", "losses"), [(0, 0), (5, 0), (3, 1), (2, 6), (9, 4)])
def test_mcnemar_p_value_is_the_exact_binomial_tail(wins: int, losses: int) -> None:
    n = wins + losses
    outcomes = list(product((0, 1), repeat=n))  # every way the discordant pairs could have gone
    expected = sum(sum(o) >= wins for o in outcomes) / len(outcomes) if n else 1.0
    assert mcnemar_p_value(wins, losses) == pytest.approx(expected)


def test_mcnemar_p_value_known_values() -> None:
    assert mcnemar_p_value(5, 0) == 1 / 32
    assert mcnemar_p_value(0, 5) == 1.0
    assert mcnemar_p_value(10, 10) == pytest.approx(0.5 + math.comb(20, 10) / 2**21)


# --- bootstrap interval -------------------------------------------------------------------------


def pairs_from(diffs: list[tuple[str, float, float]]) -> list[Pair]:
    return [Pair(*d) for d in diffs]


def test_bootstrap_interval_is_deterministic_and_contains_the_gain() -> None:
    rng = random.Random(3)
    pairs = [Pair(f"t{i}", float(rng.random() < 0.4), float(rng.random() < 0.6)) for i in range(60)]
    gain = sum(p.candidate - p.current for p in pairs) / len(pairs)
    lo, hi = paired_gain_ci(pairs, 0.95, seed=1)
    assert lo < gain < hi
    assert paired_gain_ci(pairs, 0.95, seed=1) == (lo, hi)
    lo99, hi99 = paired_gain_ci(pairs, 0.99, seed=1)
    assert lo99 <= lo and hi <= hi99


def test_bootstrap_interval_narrows_with_more_tasks() -> None:
    few = [Pair(f"t{i}", 0.0, float(i % 2)) for i in range(10)]
    many = [Pair(f"t{i}", 0.0, float(i % 2)) for i in range(400)]
    width = [hi - lo for lo, hi in (paired_gain_ci(few, 0.95), paired_gain_ci(many, 0.95))]
    assert width[1] < width[0] / 3


def test_bootstrap_resamples_tasks_not_rollouts() -> None:
    # 50 repetitions of one task are one observation: nothing to resample, no false precision
    one_task = [Pair("t0", 0.0, float(i % 2)) for i in range(50)]
    assert paired_gain_ci(one_task, 0.95) == (0.5, 0.5)
    assert paired_gain_ci([], 0.95) is None


# --- fixed rule ---------------------------------------------------------------------------------


def test_decide_fixed_keeps_harnessevolves_rule_and_adds_the_evidence() -> None:
    decision = decide_fixed([0, 0, 1, 0, 1], [1, 0, 1, 1, 0], PerformanceConfig(), ["a", "b", "c", "d", "e"])
    assert decision.outcome is Outcome.ACCEPT and decision.accepted and decision.final
    n = decision.numbers
    assert (n["wins"], n["losses"], n["ties"]) == (2, 1, 2)
    assert n["gain"] == 0.2 and n["p_value"] == 0.5
    assert n["gain_ci"][0] < 0.2 < n["gain_ci"][1]
    assert n["confidence"] == PerformanceConfig().confidence and n["mode"] == "fixed"


def test_decide_fixed_rejects_below_min_gain_and_a_tie_passes_at_zero() -> None:
    assert not decide_fixed([1, 1], [1, 0], PerformanceConfig()).accepted
    assert decide_fixed([1, 0], [0, 1], PerformanceConfig()).accepted
    with pytest.raises(ValueError, match="2 current scores but 1"):
        decide_fixed([1, 0], [1], PerformanceConfig())


def test_performance_gate_reports_the_interval_and_test() -> None:
    verdict = performance_gate([0, 0, 1, 0], [1, 0, 1, 1], [], PerformanceConfig())
    assert verdict.passed and verdict.reason == "batch gain +0.500, worst recent drop 0.000"
    assert verdict.numbers["gain_ci"] is not None and verdict.numbers["p_value"] == 0.25


def test_heldout_gate_reports_a_drop_interval() -> None:
    verdict = heldout_gate([1, 1, 1, 1, 0, 1], [1, 0, 1, 0, 0, 1], HeldoutConfig(), confidence=0.9)
    lo, hi = verdict.numbers["drop_ci"]
    assert verdict.numbers["drop"] == pytest.approx(1 / 3, abs=1e-4)
    assert lo <= verdict.numbers["drop"] <= hi
    assert verdict.numbers["confidence"] == 0.9


# --- sequential gate ----------------------------------------------------------------------------


def feed(gate: SequentialGate, signs: list[int], increment: int = 10) -> Decision:
    decision = gate.decision
    for start in range(0, len(signs), increment):
        chunk = signs[start : start + increment]
        decision = gate.update(
            (f"t{start + i}", 0.0 if s >= 0 else 1.0, 1.0 if s > 0 else 0.0 if s < 0 else 0.0)
            for i, s in enumerate(chunk)
        )
        if decision.final:
            break
    return decision


def test_a_clearly_better_candidate_is_accepted_early() -> None:
    gate = SequentialGate(SEQ, max_pairs=320)
    decision = feed(gate, [1] * 8 + [0, 0] + [1] * 8 + [0, -1] + [1] * 100)
    assert decision.outcome is Outcome.ACCEPT
    n = decision.numbers
    assert n["pairs"] <= 30 and n["rollouts"] == 2 * n["pairs"]
    assert n["llr"] >= n["accept_at"] == pytest.approx(math.log(20), abs=1e-4)
    assert n["gain_ci"] is not None and n["gain_ci"][0] > 0
    assert decision.reason.startswith("better: ")


def test_a_clearly_worse_candidate_is_rejected_early() -> None:
    decision = feed(SequentialGate(SEQ, max_pairs=320), [-1, 0, -1, -1, 0] * 40)
    assert decision.outcome is Outcome.REJECT and decision.reason.startswith("not better: ")
    n = decision.numbers
    assert n["pairs"] <= 20
    assert n["llr"] <= n["reject_at"] == pytest.approx(math.log(0.2 / (0.95 + 0.05 * 0.2)), abs=1e-4)


def test_a_gate_that_sees_only_ties_gives_up_when_the_budget_is_spent() -> None:
    gate = SequentialGate(SEQ, max_pairs=40)
    decisions = [gate.update((f"t{i}", 1.0, 1.0) for i in range(10)) for _ in range(4)]
    assert [d.outcome for d in decisions] == [Outcome.CONTINUE] * 3 + [Outcome.REJECT]
    assert decisions[0].numbers["gain_ci"] is None  # intervals are computed for final decisions
    assert decisions[-1].reason.startswith("not shown better within 40 pairs")
    with pytest.raises(ValueError, match="already decided"):
        gate.update([("t0", 0.0, 1.0)])


def test_fractional_scores_count_by_sign() -> None:
    gate = SequentialGate(SEQ, max_pairs=100)
    decision = gate.update([("a", 0.5, 0.75), ("b", 1 / 3, 1 / 3), ("c", 0.9, 0.1)])
    assert (decision.numbers["wins"], decision.numbers["losses"], decision.numbers["ties"]) == (1, 1, 1)


WIN, LOSS, TIE = ("t", 0.0, 1.0), ("t", 1.0, 0.0), ("t", 0.0, 0.0)


def simulate(
    config: PerformanceConfig, win: float, loss: float, decisions: int, seed: int
) -> tuple[float, float]:
    """Accept rate and mean pairs when each pair is a win / loss / tie with these probabilities."""
    rng = random.Random(seed)
    accepted, pairs = 0, 0
    for _ in range(decisions):
        gate = SequentialGate(config, max_pairs=400, ci_resamples=0)
        while not gate.decision.final:
            draws = [rng.random() for _ in range(config.increment)]
            gate.update(
                ("t", 0.0, 1.0) if u < win else ("t", 1.0, 0.0) if u < win + loss else ("t", 0.0, 0.0)
                for u in draws
            )
        accepted += gate.decision.accepted
        pairs += gate.decision.numbers["pairs"]
    return accepted / decisions, pairs / decisions


def test_false_accepts_stay_below_one_minus_confidence() -> None:
    # no better: wins and losses equally likely (40% of pairs discordant)
    rate, _ = simulate(SEQ, 0.2, 0.2, 600, seed=11)
    assert rate <= 0.05
    strict, _ = simulate(replace(SEQ, confidence=0.99, power=0.95), 0.2, 0.2, 300, seed=12)
    assert strict <= 0.02


def test_power_at_the_design_effect_is_close_to_the_stated_power() -> None:
    # +10 points with 40% discordance: win 0.25, loss 0.15 -> win share 0.625
    rate, mean_pairs = simulate(SEQ, 0.25, 0.15, 300, seed=13)
    assert rate >= 0.7
    worse_rate, worse_pairs = simulate(SEQ, 0.15, 0.25, 300, seed=14)
    assert worse_rate == 0.0 and worse_pairs < mean_pairs


def test_performance_verdict_from_a_sequential_decision_still_checks_recent_batches() -> None:
    gate = SequentialGate(SEQ, max_pairs=100)
    decision = feed(gate, [1] * 100)
    assert decision.accepted
    assert performance_verdict(decision, [], SEQ).passed
    dropped = performance_verdict(decision, [([1, 1], [0, 0])], SEQ)
    assert not dropped.passed and dropped.reason == "drop 1.000 on a previous batch > 0.025"
    assert dropped.numbers["mode"] == "sequential" and dropped.numbers["recent_drops"] == [1.0]
    with pytest.raises(ValueError, match="not final"):
        performance_verdict(SequentialGate(SEQ, max_pairs=5).decision, [], SEQ)


def test_rollout_schedule_visits_every_task_once_per_repetition() -> None:
    ids = [f"t{i}" for i in range(23)]
    schedule = rollout_schedule(ids, increment=10, repetitions=3, seed=5)
    assert [(rep, len(chunk)) for rep, chunk in schedule] == [(r, n) for r in range(3) for n in (10, 10, 3)]
    for rep in range(3):
        assert sorted(t for r, chunk in schedule if r == rep for t in chunk) == sorted(ids)
    orders = [[t for r, chunk in schedule if r == rep for t in chunk] for rep in range(3)]
    assert orders[0] != orders[1]
    assert schedule == rollout_schedule(ids, increment=10, repetitions=3, seed=5)


def test_the_win_share_prior_is_pinned() -> None:
    """pi1 before each increment is 1/2 + effect / (2 d_hat), d_hat = (discordant + 0.4 * 10) /
    (pairs + 10), clipped to [0.55, 0.90]: the numbers below are that formula by hand, so a changed
    prior (0.4, 10), clip or effect fails here, not only in a simulation's rates."""
    gate = SequentialGate(SEQ, max_pairs=1000)
    effect = SEQ.effect
    assert gate.win_share == pytest.approx(0.5 + effect / (2 * 0.4))  # no pairs: the prior alone
    gate.update([("a", 0.0, 1.0), ("b", 0.0, 1.0)] + [(f"t{i}", 1.0, 1.0) for i in range(8)])
    share = 0.5 + effect / (2 * ((2 + 4) / (10 + 10)))
    gate.update([("c", 1.0, 1.0)])
    assert gate.win_share == pytest.approx(min(0.9, max(0.55, share)))
    ties = SequentialGate(SEQ, max_pairs=1000)
    ties.update([(f"t{i}", 1.0, 1.0) for i in range(90)])  # d_hat = 4 / 100: clipped at the top
    ties.update([("x", 0.0, 1.0)])
    assert ties.win_share == pytest.approx(0.90)


def test_the_accept_boundary_is_pinned_at_the_nth_straight_win() -> None:
    """Wins fed one pair at a time: the log LR after n wins is the sum of log(2 pi1_i), each pi1_i
    from the formula above; the gate accepts at the first n where that reaches log(1/alpha), and not
    one win earlier."""
    alpha = 1 - SEQ.confidence
    llr, n = 0.0, 0
    while llr < math.log(1 / alpha) - 1e-9:
        d_hat = (n + 0.4 * 10) / (n + 10)
        share = min(0.9, max(0.55, 0.5 + SEQ.effect / (2 * d_hat)))
        llr += math.log(2 * share)
        n += 1
    gate = SequentialGate(SEQ, max_pairs=1000)
    outcomes = [gate.update([(f"t{i}", 0.0, 1.0)]).outcome for i in range(n)]
    assert outcomes[:-1] == [Outcome.CONTINUE] * (n - 1) and outcomes[-1] is Outcome.ACCEPT
    assert gate.llr == pytest.approx(llr, abs=1e-9) and gate.decision.numbers["llr"] == round(llr, 4)
