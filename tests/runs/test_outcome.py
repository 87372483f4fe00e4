"""The accept/revert outcome: one typed value, its text forms read back to the same value."""

from __future__ import annotations

import pytest

from harnessevolve.runs.outcome import Outcome


@pytest.mark.parametrize(
    "outcome, verdict, text",
    [
        (Outcome.kept(), "accepted", "accepted"),
        (Outcome.kept(tie=True), "accepted", "accepted (tie)"),
        (Outcome.refused("performance"), "rejected by performance", "reverted by performance"),
        (Outcome.refused("quality", of=3), "rejected by quality", "none of 3 kept"),
    ],
)
def test_each_text_form_reads_back_as_the_outcome(outcome: Outcome, verdict: str, text: str) -> None:
    assert outcome.verdict() == verdict and outcome.text() == text
    row = outcome if outcome.of == 1 else Outcome.refused(None, of=outcome.of)  # "none of K" names no gate
    assert Outcome.parse(text) == row
    assert Outcome.parse(text + " (recovered)") == row
    back = Outcome.from_verdict(verdict)
    assert back is not None and back.accepted == outcome.accepted
    if outcome.of == 1:
        assert back == Outcome(outcome.accepted, outcome.gate)  # the trailer holds no tie


@pytest.mark.parametrize(
    "text", ["proposer had nothing new", "no failures to learn from", "rejected by ", "none of x kept", ""]
)
def test_rows_without_a_judged_candidate_are_no_outcome(text: str) -> None:
    assert Outcome.parse(text) is None


def test_a_trailer_that_is_not_ours_is_no_verdict() -> None:
    assert Outcome.from_verdict("accepted (tie)") is None
    assert Outcome.from_verdict("Rejected by performance") is None
