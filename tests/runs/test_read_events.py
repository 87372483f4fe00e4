"""Typed ledger reads: every line comes back as its catalog record, with an UnknownEvent for the rest."""

from __future__ import annotations

import json
from pathlib import Path

from harnessevolve.runs import events as ev
from harnessevolve.runs.ledger import LEDGER_VERSION, Ledger, read_events


def test_events_read_back_as_their_records_with_their_time(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)
    ledger.append(ev.GenerationStarted(generation=1, rev="a" * 40))
    ledger.append("no_proposal", generation=1, proposer="demo")
    ledger.close()
    started, none = read_events(path)
    assert started == ev.GenerationStarted(generation=1, rev="a" * 40)
    assert isinstance(none, ev.NoProposal) and none.proposer == "demo" and none.event_name == "no_proposal"
    assert started.ts and started.ts.startswith("20")


def test_an_unknown_name_or_a_line_that_does_not_fit_is_an_unknown_event(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    lines = [
        {"v": LEDGER_VERSION, "ts": "t1", "event": "from_the_future", "x": 1},
        {"v": LEDGER_VERSION, "ts": "t2", "event": "no_proposal", "generation": 1},
        {"v": LEDGER_VERSION, "ts": "t3", "event": "no_proposal", "generation": 1, "proposer": "d", "new": 2},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    future, torn, extra = read_events(path)
    assert isinstance(future, ev.UnknownEvent)
    assert (future.name, future.payload, future.event_name, future.ts) == (
        "from_the_future",
        {"x": 1},
        "from_the_future",
        "t1",
    )
    assert isinstance(torn, ev.UnknownEvent) and torn.name == "no_proposal" and "fit" in torn.reason
    assert extra == ev.NoProposal(generation=1, proposer="d")  # a later version's extra field is dropped


def test_an_unknown_event_is_never_written(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    try:
        ledger.append(ev.UnknownEvent(name="x", payload={}))
    except TypeError as exc:
        assert "never written" in str(exc)
    else:
        raise AssertionError("an UnknownEvent was written")
    finally:
        ledger.close()


def test_duplicate_event_of_a_redone_step_is_not_written_again(tmp_path: Path) -> None:
    """A resume redoes the step a crash cut short: what it already logged is not logged twice,
    and the first event that differs ends the replay."""
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)
    ledger.append(ev.GenerationStarted(generation=1, rev="a"))
    ledger.append(ev.NoProposal(generation=1, proposer="demo"))
    ledger.close()
    again = Ledger(path)
    again.replay(read_events(path))
    again.append(ev.GenerationStarted(generation=1, rev="a"))  # tuples or lists: the same line
    again.append(ev.ProposalFailed(generation=1, proposer="demo", errors=["x"]))  # the redo diverged
    again.append(ev.NoProposal(generation=1, proposer="demo"))  # written: the replay ended
    again.close()
    names = [e.event_name for e in read_events(path)]
    assert names == ["generation_started", "no_proposal", "proposal_failed", "no_proposal"]
