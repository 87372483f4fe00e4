"""Crash points: a run killed right after each ledger event type it writes, and inside each
multi-step write, then resumed, leaves the same ledger as the run that was never interrupted.

The kill is in-process fault injection, not timing: the run goes on in a forked child whose
ledger (or git, or file write) calls ``os._exit`` at the chosen point -- no ``finally``, no
handler, no flush runs, as under ``kill -9``. The parent resumes the run and compares the whole
ledger (shas, times and process events aside) with an uninterrupted run's: every event appears
exactly once, in the same order, with the same fields (tie flags, verdicts, numbers, counters)."""

from __future__ import annotations

import os
import re
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from bench_subset import shell_basics_subset
from policies import TogglePrompt
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.harness import git as harness_git
from harnessevolve.optimize import registry
from harnessevolve.pipeline import history
from harnessevolve.runs import events as ev
from harnessevolve.runs.ledger import Ledger, read_ledger

KILLED = 86
"""The child's exit status at the crash point (anything else: the point was never reached)."""
SHA = re.compile(r"\b[0-9a-f]{40}\b")
NOT_COMPARED: tuple[type[ev.Event], ...] = ()
"""Every event the run writes is compared (the edit-firing watch is kept in the run folder too)."""
BY_PROCESS = {"ts", "recovered", "usage", "cached_rollouts", "infra", "rollouts", "tokens"}
"""Fields that say which process wrote an event (or what it spent), not what the run did
(``infra``'s rollouts count a rollout served from the cache on resume once more). ``rollouts`` and ``tokens``
are checked apart (``counters_hold``): a rollout that finished after a killed process's last
event is served from the cache on resume, so it counts as cached there."""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """shell-basics cut to one family (4 train, 2 validation, 2 test tasks), with references."""
    return shell_basics_subset(tmp_path_factory.mktemp("bench") / "shell-basics", ("count-lines",))


def _args(harness: Path, bench: Path, gates: str) -> list[str]:
    args = ["run", "-H", str(harness), "-b", str(bench), "-n", "2", "--batch-size", "2"]
    args += ["-m", "scripted/policy:gives_up", "--proposer", "toggle", "--unsafe-no-sandbox"]
    return args + ["--floor-sample", "0"] + (["--gates", gates] if gates else [])


def _new_harness(root: Path, name: str) -> Path:
    target = root / name
    result = CliRunner().invoke(app, ["init", str(target)])
    assert result.exit_code == 0, result.output
    return target


def _run_dir(harness: Path) -> Path:
    (run,) = list((harness / ".harnessevolve" / "runs").iterdir())
    return run


# -- the faults ---------------------------------------------------------------------------------


def _die() -> None:
    os._exit(KILLED)


def after_event(name: str, nth: int = 1) -> Callable[[pytest.MonkeyPatch], None]:
    """Kill right after the ``nth`` ``name`` event is on disk (flushed and fsynced)."""

    def arm(patch: pytest.MonkeyPatch) -> None:
        real, seen = Ledger.append, Counter[str]()

        def append(self: Ledger, event: Any, **data: Any) -> dict[str, Any]:
            line = real(self, event, **data)
            seen[line["event"]] += 1
            if line["event"] == name and seen[name] == nth:
                _die()
            return line

        patch.setattr(Ledger, "append", append)

    return arm


def inside_candidate_write(patch: pytest.MonkeyPatch) -> None:
    """Kill after the candidate's files are written, before its commit (a dirty harness)."""
    real = history.write_candidate

    def write(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        _die()

    patch.setattr(history, "write_candidate", write)


def after_git(method: str) -> Callable[[pytest.MonkeyPatch], None]:
    """Kill right after ``HarnessRepo.<method>`` made its commit, before the event that records it."""

    def arm(patch: pytest.MonkeyPatch) -> None:
        real = getattr(harness_git.HarnessRepo, method)

        def made(self: harness_git.HarnessRepo, *args: Any, **kwargs: Any) -> str:
            real(self, *args, **kwargs)
            _die()
            raise AssertionError

        patch.setattr(harness_git.HarnessRepo, method, made)

    return arm


between_commit_and_event = after_git("commit_all")
"""Kill after git made the candidate's commit, before ``candidate_committed``."""
between_revert_and_event = after_git("revert")
"""Kill after git made the revert commit, before ``candidate_reverted``."""


def inside_gate_report_write(patch: pytest.MonkeyPatch) -> None:
    """Kill inside the gate report's atomic write: its temp file written, never renamed."""

    def atomic_write_json(path: Path, document: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / f".{path.name}.x1y2z3.tmp").write_text("{")
        _die()

    patch.setattr(history, "atomic_write_json", atomic_write_json)


# -- running, killing, resuming -----------------------------------------------------------------


def _in_child(body: Callable[[], None]) -> int:
    """Run ``body`` in a forked child; its exit status (``KILLED`` when a fault fired)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            body()
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status), f"the child died of signal {signal.Signals(os.WTERMSIG(status)).name}"
    return os.WEXITSTATUS(status)


def crash_and_resume(
    root: Path, bench: Path, gates: str, name: str, fault: Callable[[pytest.MonkeyPatch], None]
) -> tuple[Path, Any]:
    harness = _new_harness(root, name)

    def doomed() -> None:
        with pytest.MonkeyPatch.context() as patch:
            fault(patch)
            CliRunner().invoke(app, _args(harness, bench, gates))

    assert _in_child(doomed) == KILLED, f"{name}: the crash point was never reached"
    resumed = CliRunner().invoke(
        app, ["run", "-H", str(harness), "-m", "scripted/policy:gives_up", "--resume", _run_dir(harness).name]
    )
    return harness, resumed


def _labels(events: list[ev.Event]) -> Iterator[str]:
    for record in events:
        yield from SHA.findall(str(record.to_json()))


def normalized(harness: Path) -> list[dict[str, Any]]:
    """The run's ledger as comparable data: process events dropped, per-process fields dropped,
    shas (40 hex, and their 8-hex prefixes) named by order of first appearance, paths and ids
    of this harness and run replaced."""
    events = read_ledger(_run_dir(harness) / "ledger.jsonl")
    names: dict[str, str] = {}
    for sha in _labels(events):
        names.setdefault(sha, f"<sha{len(names)}>")

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in BY_PROCESS}
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, str):
            value = value.replace(str(harness), "<harness>").replace(_run_dir(harness).name, "<run>")
            for sha, label in names.items():
                value = value.replace(sha, label).replace(sha[:8], label)
        return value

    return [clean(e.to_json()) for e in events if not isinstance(e, (*ev.PROCESS_EVENTS, *NOT_COMPARED))]


def counters_hold(harness: Path, reference: Path) -> bool:
    """The resumed run's counters, summed over its processes: no rollout ran twice (at most the
    uninterrupted run's count), none was lost (ran, or was served from the cache)."""
    (got,) = [e for e in read_ledger(_run_dir(harness) / "ledger.jsonl") if isinstance(e, ev.RunFinished)]
    (ran,) = [e for e in read_ledger(_run_dir(reference) / "ledger.jsonl") if isinstance(e, ev.RunFinished)]
    done, cached, expected = got.rollouts or 0, got.cached_rollouts or 0, ran.rollouts or 0
    return done <= expected <= done + cached and (got.tokens or 0) <= (ran.tokens or 0)


def event_points(reference: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Every event type of the reference run once (its first occurrence), and every
    ``candidate_accepted`` (one per generation)."""
    counts = Counter(e["event"] for e in reference)
    points = [(name, 1) for name in dict.fromkeys(e["event"] for e in reference)]
    return points + [(ev.CandidateAccepted.NAME, n) for n in range(2, counts[ev.CandidateAccepted.NAME] + 1)]


SCENARIOS = {
    "ties": "paper",  # HarnessEvolve's accept-on-tie: each generation accepts its edit on a tie
    "reverts": "",  # the default gates refuse those ties: each edit is committed, then reverted
}
REVERT_POINTS = (ev.Committing.NAME, ev.CandidateCommitted.NAME, ev.CandidateReverted.NAME)
"""The reverts scenario's own crash points (the others are the ties scenario's too)."""


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_crash_point_after_every_event_and_inside_every_write_resumes_exactly_once(
    scenario: str, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(registry.PROPOSERS, "toggle", TogglePrompt)
    gates = SCENARIOS[scenario]
    plain = _new_harness(tmp_path, "plain")
    CliRunner().invoke(app, _args(plain, tiny, gates))
    reference = normalized(plain)
    names = [e["event"] for e in reference]
    assert names[-1] == ev.RunFinished.NAME, names
    decided = ev.CandidateAccepted.NAME if gates else ev.CandidateReverted.NAME
    assert names.count(decided) == 2, names  # one decision per generation
    points = [p for p in event_points(reference) if gates or p[0] in REVERT_POINTS]
    faults: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
        f"after-{name}-{nth}": after_event(name, nth) for name, nth in points
    }
    if gates:
        faults |= {
            "inside-candidate-write": inside_candidate_write,
            "after-git-commit": between_commit_and_event,
        }
        faults |= {"inside-gate-report-write": inside_gate_report_write}
    else:
        faults["after-git-revert"] = between_revert_and_event
    differ = {}
    for point, fault in faults.items():
        harness, resumed = crash_and_resume(tmp_path, tiny, gates, point, fault)
        if point == f"after-{ev.RunFinished.NAME}-1":  # nothing left to do: the resume is refused
            assert resumed.exit_code != 0 and "already finished" in resumed.output, resumed.output
        got = normalized(harness)
        if not counters_hold(harness, plain):
            differ[point] = ("counters", None, resumed.output[-500:])
        elif got != reference:
            first = next((i for i, (a, b) in enumerate(zip(got, reference, strict=False)) if a != b), None)
            differ[point] = (first, got[first] if first is not None else len(got), resumed.output[-500:])
    assert not differ, f"resumed ledgers that differ from the uninterrupted one: {differ}"


def test_crash_point_after_candidate_accepted_keeps_one_acceptance_per_generation_and_its_tie(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The case of issue 29's D1 and D2: killed between ``candidate_accepted`` and
    ``generation_finished``, the resumed run holds one acceptance per generation, tie flag kept."""
    monkeypatch.setitem(registry.PROPOSERS, "toggle", TogglePrompt)
    harness, resumed = crash_and_resume(
        tmp_path, tiny, "paper", "accepted", after_event(ev.CandidateAccepted.NAME, 1)
    )
    assert resumed.exit_code in (0, 1), resumed.output
    events = read_ledger(_run_dir(harness) / "ledger.jsonl")
    accepted = [e for e in events if isinstance(e, ev.CandidateAccepted)]
    assert [e.generation for e in accepted] == [1, 2]
    assert all(e.tie for e in accepted)
    finished = [e for e in events if isinstance(e, ev.GenerationFinished)]
    assert [(e.generation, e.outcome) for e in finished] == [(1, "accepted (tie)"), (2, "accepted (tie)")]
    (end,) = [e for e in events if isinstance(e, ev.RunFinished)]
    assert len(end.accepted) == len(set(end.accepted)) == 2
    (epoch,) = [e for e in events if isinstance(e, ev.EpochFinished)]
    assert epoch.generation == 2 and epoch.snapshots == 3  # the seed and one snapshot per generation
    status = CliRunner().invoke(app, ["status", "-H", str(harness), "--json"])
    assert '"accepted_on_ties"' in status.output and status.output.count(accepted[0].sha) >= 2


def test_duplicate_event_after_run_finished_is_refused(tmp_path: Path) -> None:
    """Events after ``run_finished`` are impossible: the ledger refuses them (a test split scored
    later, ``test_evaluated``, is the one exception)."""
    from harnessevolve.runs.ledger import LedgerClosedError

    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)
    ledger.append(ev.RunFinished(accepted=[], reverted=[], rev="a" * 40))
    with pytest.raises(LedgerClosedError, match="already finished"):
        ledger.append(ev.GenerationFinished(generation=1, outcome="accepted", rev="a" * 40))
    ledger.close()
    reopened = Ledger(path)
    with pytest.raises(LedgerClosedError):
        reopened.append(ev.RunFinished(accepted=[], reverted=[], rev="a" * 40))
    reopened.append(ev.TestEvaluated(tasks=1, revisions={"seed": "a"}, scores={"seed": 1.0}))
    reopened.close()
    assert [e.event_name for e in read_ledger(path)] == ["run_finished", "test_evaluated"]


def test_duplicate_event_from_a_resume_that_overlapped_a_finishing_one_is_refused(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29's D3: a resume reads the ledger, then another resume finishes the run before this
    one gets the lock. The ledger is read again under the lock: the run is refused as finished,
    and nothing is appended after ``run_finished``."""
    from harnessevolve.runs import rundir

    monkeypatch.setitem(registry.PROPOSERS, "toggle", TogglePrompt)
    harness = _new_harness(tmp_path, "overlap")

    def doomed() -> None:
        with pytest.MonkeyPatch.context() as patch:
            after_event(ev.GenerationFinished.NAME, 1)(patch)
            CliRunner().invoke(app, _args(harness, tiny, "paper"))

    assert _in_child(doomed) == KILLED
    ledger_path = _run_dir(harness) / "ledger.jsonl"
    real = rundir.HarnessLock.acquire

    def acquire(self: rundir.HarnessLock, run_id: str) -> None:  # the other resume finished first
        other = Ledger(ledger_path)
        other.append(ev.RunFinished(accepted=[], reverted=[], rev="0" * 40))
        other.close()
        real(self, run_id)

    monkeypatch.setattr(rundir.HarnessLock, "acquire", acquire)
    result = CliRunner().invoke(
        app, ["run", "-H", str(harness), "-m", "scripted/policy:gives_up", "--resume", _run_dir(harness).name]
    )
    assert result.exit_code == 2 and "already finished" in result.output, result.output
    assert read_ledger(ledger_path)[-1].event_name == ev.RunFinished.NAME
