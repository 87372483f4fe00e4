"""Noise-aware performance decisions on paired outcomes (current vs candidate on the same task).

A *pair* is one task run once by each harness: ``Pair(task_id, current, candidate)`` with scores
in [0, 1] (pass/fail is 0/1). A pair is a *win* when the candidate scores higher, a *loss* when
it scores lower, a *tie* otherwise (the discordant pairs of McNemar's test are the wins and
losses).

``decide_fixed`` — HarnessEvolve's rule, unchanged: accept when the mean gain on one batch is
at least ``min_gain``. It adds the evidence the rule ignores: a paired (task-clustered) bootstrap
confidence interval of the gain and the exact one-sided McNemar / sign-test p-value.

``SequentialGate`` — a sequential probability ratio test (SPRT) on the signs of discordant pairs,
fed increments of pairs (one pair per task per repetition) until it accepts or rejects::

    W_i = 1 for a win, 0 for a loss (ties carry no information about the sign and are skipped)
    H0 (no better): P(W_i = 1 | the past) = 1/2  -- true whatever the tasks' difficulties, when on
        every task the two harnesses succeed equally often (a worse candidate gives <= 1/2)
    H1 (gains `effect`): for pass/fail outcomes gain = P(win) - P(loss) and the discordance rate
        is d = P(win) + P(loss), so the share of wins among discordant pairs is
        pi1 = 1/2 + effect / (2 d).  d is a nuisance: before each increment it is estimated from
        the pairs already seen, d_hat = (discordant + 0.4 * 10) / (pairs + 10), and pi1 is
        clipped to [0.55, 0.90].
    log LR:  L_n = sum_i W_i log(2 pi1_i) + (1 - W_i) log(2 (1 - pi1_i))

Error control. ``pi1_i`` is fixed before ``W_i`` is seen (it only uses earlier increments), so
under H0 every factor has conditional mean 1 and exp(L_n) is a non-negative martingale (a
super-martingale for a worse candidate). Ville's inequality gives

    P_H0( sup_n L_n >= log(1/alpha) ) <= alpha,   alpha = 1 - confidence,

for any increment sizes, any stopping rule and the truncation below: accepting at
``L >= log(1/alpha)`` is a false accept with probability at most alpha, exactly, not
asymptotically. Rejection (futility) happens at ``L <= log B`` with
``B = beta / (1 - alpha + alpha * beta)``, beta = 1 - power: Wald's approximation of the
operating characteristic with upper bound A = 1/alpha gives P(accept | pi = pi1) ~= 1 - beta.
Power is therefore approximate (overshoot at the bounds and the estimated d move it); the
false-accept bound is not. When ``max_pairs`` are spent without a decision the gate rejects
("not shown better"), which can only lower the false-accept rate.

Assumptions the caller must honour: pairs of one increment are chosen before their outcomes are
known (a fixed schedule, e.g. ``rollout_schedule``), and repeated rollouts of a task are
independent draws. A harness at temperature 0 repeats itself: feed it distinct tasks, not
repetitions, or the same evidence is counted twice.

Fractional scores are handled through their signs (a sign test); ``effect`` then reads as the
gain of a pass/fail metric with the same discordance, an approximation.

The gain's confidence interval (``gain_ci``) is a percentile bootstrap over tasks (all
repetitions of a task resampled together) with a fixed seed. After sequential stopping it is
nominal: it does not correct for the look-ahead that stopped the test.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from harnessevolve.core.enums import Outcome
from harnessevolve.gate.config import PerformanceConfig

# Scores are fractions (1/3, 2/3 ...): compare with a tolerance so float noise never decides a gate.
TOLERANCE = 1e-9

PRIOR_DISCORDANCE = 0.4
"""d_hat before any pair is seen, worth PRIOR_PAIRS pairs."""
PRIOR_PAIRS = 10
MIN_WIN_SHARE, MAX_WIN_SHARE = 0.55, 0.90
CI_RESAMPLES = 2000


@dataclass(frozen=True)
class Pair:
    """One task run once by each harness (scores in [0, 1])."""

    task_id: str
    current: float
    candidate: float

    @property
    def sign(self) -> int:
        diff = self.candidate - self.current
        return 1 if diff > TOLERANCE else -1 if diff < -TOLERANCE else 0


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return self.outcome is Outcome.ACCEPT

    @property
    def final(self) -> bool:
        return self.outcome is not Outcome.CONTINUE


def as_pairs(pairs: Iterable[Pair | tuple[str, float, float]]) -> list[Pair]:
    return [p if isinstance(p, Pair) else Pair(*p) for p in pairs]


def mcnemar_p_value(wins: int, losses: int) -> float:
    """Exact one-sided McNemar (sign) test: P(at least ``wins`` of the discordant pairs go to the
    candidate | each goes either way with probability 1/2). 1.0 when nothing is discordant."""
    n = wins + losses
    if n == 0:
        return 1.0
    return float(sum(math.comb(n, k) for k in range(wins, n + 1)) / 2**n)


def paired_gain_ci(
    pairs: Sequence[Pair], confidence: float, *, resamples: int = CI_RESAMPLES, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean gain, resampling tasks (each with all its pairs);
    ``None`` for no pairs. Deterministic for a given ``seed``."""
    if not pairs:
        return None
    clusters: dict[str, list[float]] = {}
    for p in pairs:
        total = clusters.setdefault(p.task_id, [0.0, 0.0])
        total[0] += p.candidate - p.current
        total[1] += 1
    sums = list(clusters.values())
    k = len(sums)
    rng = random.Random(seed)
    stats = []
    for _ in range(resamples):
        diff = n = 0.0
        for i in rng.choices(range(k), k=k):
            diff += sums[i][0]
            n += sums[i][1]
        stats.append(diff / n)
    stats.sort()
    tail = (1 - confidence) / 2
    lo = stats[max(0, math.floor(tail * resamples))]
    hi = stats[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]
    return round(lo, 4) + 0.0, round(hi, 4) + 0.0  # + 0.0: never print -0.0


def mean_ci(
    values: Sequence[float], confidence: float, *, resamples: int = CI_RESAMPLES, seed: int = 0
) -> tuple[float, float] | None:
    """Interval of a mean score over tasks: the Wilson score interval when every value is 0 or 1 (a
    pass rate; closed form, ``statistics.NormalDist`` for the quantile, good at small n and at 0 or
    1, where the normal interval collapses), else a percentile bootstrap over the values; ``None``
    for no values. Deterministic for a given ``seed``."""
    n = len(values)
    if n == 0:
        return None
    if all(v in (0.0, 1.0) for v in values):
        z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
        p = sum(values) / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return round(max(0.0, centre - half), 4) + 0.0, round(min(1.0, centre + half), 4) + 0.0
    rng = random.Random(seed)
    stats = sorted(math.fsum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1 - confidence) / 2
    lo = stats[max(0, math.floor(tail * resamples))]
    hi = stats[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]
    return round(lo, 4) + 0.0, round(hi, 4) + 0.0


def _counts(pairs: Sequence[Pair]) -> tuple[int, int, int]:
    signs = [p.sign for p in pairs]
    return signs.count(1), signs.count(-1), signs.count(0)


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return math.fsum(values) / len(values) if values else 0.0


def decide_fixed(
    current: Sequence[float],
    candidate: Sequence[float],
    config: PerformanceConfig,
    task_ids: Sequence[str] | None = None,
    *,
    ci_resamples: int = CI_RESAMPLES,
    seed: int = 0,
) -> Decision:
    """HarnessEvolve's rule on one batch (same task order in both lists): accept when
    mean(candidate) - mean(current) >= ``min_gain``; the CI and p-value are reported, not used."""
    if len(current) != len(candidate):
        raise ValueError(f"{len(current)} current scores but {len(candidate)} candidate scores")
    ids = list(task_ids) if task_ids is not None else [str(i) for i in range(len(current))]
    pairs = [Pair(t, a, b) for t, a, b in zip(ids, current, candidate, strict=True)]
    gain = _mean(candidate) - _mean(current)
    wins, losses, ties = _counts(pairs)
    ci = paired_gain_ci(pairs, config.confidence, resamples=ci_resamples, seed=seed) if ci_resamples else None
    numbers = {
        "mode": "fixed",
        "current": round(_mean(current), 4),
        "candidate": round(_mean(candidate), 4),
        "gain": round(gain, 4),
        "min_gain": config.min_gain,
        "gain_ci": list(ci) if ci else None,
        "confidence": config.confidence,
        "wins": wins,
        "losses": losses,
        "ties": ties,
        "p_value": float(f"{mcnemar_p_value(wins, losses):.4g}"),
        "tasks": len(pairs),
    }
    if gain < config.min_gain - TOLERANCE:
        return Decision(Outcome.REJECT, f"batch gain {gain:+.3f} < {config.min_gain:+.3f}", numbers)
    return Decision(Outcome.ACCEPT, f"batch gain {gain:+.3f} >= {config.min_gain:+.3f}", numbers)


POOLED_SOURCES = ("batch", "recent", "validation")


def pooled_p_value_at_best(wins: int, losses: int, unseen: int) -> float:
    """The smallest sign-test p-value reachable if ``unseen`` pairs still to be scored all went to
    the candidate: above alpha means no outcome of them can get the candidate accepted by the sign
    test (``pooled_hopeless`` adds the unopposed rule)."""
    return mcnemar_p_value(wins + unseen, losses)


def pooled_hopeless(wins: int, losses: int, unseen: int, config: PerformanceConfig) -> bool:
    """True when no outcome of ``unseen`` pairs still to be scored could get the candidate accepted:
    the sign test cannot reach ``pooled_alpha`` and (with ``accept_unopposed``) a loss is already in."""
    if config.accept_unopposed and losses == 0 and wins + unseen >= 1:
        return False
    return pooled_p_value_at_best(wins, losses, unseen) > config.pooled_alpha


def unopposed_bound(pairs: int) -> float:
    """The most often a candidate no better than the current harness wins at least one of ``pairs``
    pairs and loses none, over every rate at which an edit flips a task's outcome (each flip a win
    or a loss with probability 1/2): max over q of (1 - q/2)^n - (1 - q)^n, reached at
    q = (r - 1) / (r - 1/2), r = 2^(1/(n-1)); about 0.25 for any n above a few."""
    if pairs < 1:
        return 0.0
    if pairs == 1:
        return 0.5
    r = 2 ** (1 / (pairs - 1))
    q = (r - 1) / (r - 0.5)
    return float((1 - q / 2) ** pairs - (1 - q) ** pairs)


def decide_pooled(
    evidence: Mapping[str, Sequence[Pair]],
    config: PerformanceConfig,
    *,
    ci_resamples: int = CI_RESAMPLES,
    seed: int = 0,
) -> Decision:
    """One decision over every paired outcome of candidate vs current the judge has: ``evidence``
    maps a source (``batch``, ``recent``, ``validation``) to its pairs. Accept when the candidate
    wins more discordant pairs than it loses and the exact one-sided sign test over all of them gives
    p <= ``pooled_alpha``: P(accepting a candidate no better than current) <= pooled_alpha, whatever
    the sizes of the sets. A win on one set and a loss on another weigh the same; no per-set veto.

    With ``accept_unopposed`` a candidate that wins at least one pair and loses none also passes
    (``numbers["unopposed"]``): at temperature 0 an edit that fixes one rare failure wins one pair
    and ties the rest, which no sign test can weigh (one pair gives p = 0.5). The price is stated:
    a no-better candidate passes that way at most ``unopposed_bound(pairs)`` of the time (~25%),
    the worst case over how often an edit flips outcomes; one that loses any pair is held to
    ``pooled_alpha``."""
    pairs = [p for source in POOLED_SOURCES for p in evidence.get(source, ())]
    wins, losses, ties = _counts(pairs)
    p_value = mcnemar_p_value(wins, losses)
    ci = paired_gain_ci(pairs, config.confidence, resamples=ci_resamples, seed=seed) if ci_resamples else None
    by_source = {}
    for source in POOLED_SOURCES:
        if source in evidence:
            w, lo, t = _counts(list(evidence[source]))
            by_source[source] = {"wins": w, "losses": lo, "ties": t}
    batch = list(evidence["batch"]) if "batch" in evidence else []
    numbers = {
        "mode": "pooled",
        "current": round(_mean(p.current for p in batch), 4),
        "candidate": round(_mean(p.candidate for p in batch), 4),
        "gain": round(_mean(p.candidate - p.current for p in pairs), 4),
        "gain_ci": list(ci) if ci else None,
        "confidence": config.confidence,
        "wins": wins,
        "losses": losses,
        "ties": ties,
        "p_value": float(f"{p_value:.4g}"),
        "alpha": config.pooled_alpha,
        "sources": by_source,
        "tasks": len(pairs),
    }
    shown = ", ".join(f"{s} {v['wins']}W/{v['losses']}L" for s, v in by_source.items())
    if config.accept_unopposed and wins >= 1 and losses == 0 and p_value > config.pooled_alpha + TOLERANCE:
        bound = unopposed_bound(len(pairs))
        numbers.update(unopposed=True, unopposed_bound=round(bound, 4))
        return Decision(
            Outcome.ACCEPT,
            f"{wins} win{'s' if wins != 1 else ''}, no loss over {len(pairs)} pairs ({shown}): "
            f"unopposed (sign test p {p_value:.3f}; a no-better candidate passes this way at most "
            f"{bound:.0%} of the time)",
            numbers,
        )
    if wins > losses and p_value <= config.pooled_alpha + TOLERANCE:
        return Decision(
            Outcome.ACCEPT,
            f"{wins} wins, {losses} losses over {len(pairs)} pairs ({shown}): sign test "
            f"p {p_value:.3f} <= {config.pooled_alpha:g}",
            numbers,
        )
    if wins == losses == 0:
        why = "every pair tied: ties are not gains"
    elif wins <= losses:
        why = "no more wins than losses"
    else:
        why = f"sign test p {p_value:.3f} > {config.pooled_alpha:g}"
    return Decision(
        Outcome.REJECT, f"{wins} wins, {losses} losses over {len(pairs)} pairs ({shown}): {why}", numbers
    )


class SequentialGate:
    """Accept / reject / continue after each increment of pairs; see the module docstring.

    ``max_pairs``: the budget (tasks x repetitions); when it is spent undecided the gate rejects.
    After a final decision, ``update`` refuses more pairs.
    """

    def __init__(
        self, config: PerformanceConfig, max_pairs: int, *, ci_resamples: int = CI_RESAMPLES, seed: int = 0
    ) -> None:
        if max_pairs < 1:
            raise ValueError("max_pairs must be at least 1")
        self.config = config
        self.max_pairs = max_pairs
        self.ci_resamples = ci_resamples
        self.seed = seed
        self.alpha = 1 - config.confidence
        beta = 1 - config.power
        self.accept_at = math.log(1 / self.alpha)
        self.reject_at = math.log(beta / (1 - self.alpha + self.alpha * beta))
        self.pairs: list[Pair] = []
        self.wins = self.losses = 0
        self.llr = 0.0
        self.win_share = self._win_share()
        self.decision = Decision(Outcome.CONTINUE, "no pairs yet", self._numbers())

    def _win_share(self) -> float:
        discordant = self.wins + self.losses
        d_hat = (discordant + PRIOR_DISCORDANCE * PRIOR_PAIRS) / (len(self.pairs) + PRIOR_PAIRS)
        return min(MAX_WIN_SHARE, max(MIN_WIN_SHARE, 0.5 + self.config.effect / (2 * d_hat)))

    def update(self, pairs: Iterable[Pair | tuple[str, float, float]]) -> Decision:
        """Add one increment of pairs (chosen before their outcomes were known) and decide."""
        if self.decision.final:
            raise ValueError(f"the gate already decided: {self.decision.outcome}")
        share = self.win_share = self._win_share()  # predictable: fixed before this increment is seen
        log_win, log_loss = math.log(2 * share), math.log(2 * (1 - share))
        for pair in as_pairs(pairs):
            self.pairs.append(pair)
            if pair.sign > 0:
                self.wins += 1
                self.llr += log_win
            elif pair.sign < 0:
                self.losses += 1
                self.llr += log_loss
        self.decision = self._decide()
        return self.decision

    def _decide(self) -> Decision:
        n, w, lo = len(self.pairs), self.wins, self.losses
        seen = f"{w} wins vs {lo} losses in {n} pairs"
        if self.llr >= self.accept_at - TOLERANCE:
            return Decision(
                Outcome.ACCEPT,
                f"better: {seen} (log LR {self.llr:.2f} >= {self.accept_at:.2f})",
                self._numbers(final=True),
            )
        if self.llr <= self.reject_at + TOLERANCE:
            return Decision(
                Outcome.REJECT,
                f"not better: {seen} (log LR {self.llr:.2f} <= {self.reject_at:.2f})",
                self._numbers(final=True),
            )
        if n >= self.max_pairs:
            return Decision(
                Outcome.REJECT,
                f"not shown better within {self.max_pairs} pairs: {seen} (log LR {self.llr:.2f})",
                self._numbers(final=True),
            )
        return Decision(
            Outcome.CONTINUE,
            f"undecided: {seen} (log LR {self.llr:.2f} in ({self.reject_at:.2f}, {self.accept_at:.2f}))",
            self._numbers(),
        )

    def _numbers(self, final: bool = False) -> dict[str, Any]:
        n = len(self.pairs)
        ci = (
            paired_gain_ci(self.pairs, self.config.confidence, resamples=self.ci_resamples, seed=self.seed)
            if final and self.ci_resamples
            else None
        )
        return {
            "mode": "sequential",
            "pairs": n,
            "rollouts": 2 * n,
            "tasks": len({p.task_id for p in self.pairs}),
            "current": round(_mean(p.current for p in self.pairs), 4),
            "candidate": round(_mean(p.candidate for p in self.pairs), 4),
            "gain": round(_mean(p.candidate - p.current for p in self.pairs), 4),
            "gain_ci": list(ci) if ci else None,
            "confidence": self.config.confidence,
            "wins": self.wins,
            "losses": self.losses,
            "ties": n - self.wins - self.losses,
            "llr": round(self.llr, 4),
            "accept_at": round(self.accept_at, 4),
            "reject_at": round(self.reject_at, 4),
            "win_share_h1": round(self.win_share, 4),
            "effect": self.config.effect,
            "power": self.config.power,
            "max_pairs": self.max_pairs,
        }


def rollout_schedule(
    task_ids: Sequence[str], *, increment: int, repetitions: int, seed: int
) -> list[tuple[int, tuple[str, ...]]]:
    """The increments to feed a ``SequentialGate``: ``(repetition, task ids)``. Repetition r visits
    every task once, in an order shuffled by ``(seed, r)``, in chunks of ``increment`` tasks.
    Fixed in advance, so no increment depends on outcomes."""
    out: list[tuple[int, tuple[str, ...]]] = []
    for rep in range(repetitions):
        order = list(task_ids)
        random.Random(f"{seed}:{rep}").shuffle(order)
        out += [(rep, tuple(order[i : i + increment])) for i in range(0, len(order), increment)]
    return out
