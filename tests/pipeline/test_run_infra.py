"""``run_finished`` counters hold for the whole run, every process of a resumed one included."""

from __future__ import annotations

from harnessevolve.pipeline.session import run_infra
from harnessevolve.runs.counters import Counts, RunCounters
from harnessevolve.runs.events import InfraFailure
from harnessevolve.scoring.infra import InfraTally


def _failure(reason: str, retry: bool = False) -> InfraFailure:
    return InfraFailure(task="t", harness_hash="h", reason=reason, detail="d", retry=retry)


def test_machine_failures_of_every_process_count_over_every_process_rollouts():
    events = [_failure("sandbox_start"), _failure("endpoint", True)]
    events += [_failure("sandbox_start"), _failure("timeout")]
    infra = run_infra(InfraTally(0.25), events, rollouts=40)
    assert infra == {
        "rollouts": 40,
        "failures": 3,
        "share": 0.075,
        "reasons": {"sandbox_start": 2, "timeout": 1},
        "retried": 1,
        "max_share": 0.25,
    }
    assert run_infra(InfraTally(), [], rollouts=0)["share"] == 0.0


def test_a_killed_process_counts_survive_into_the_resumed_totals(tmp_path):
    killed = RunCounters(tmp_path)
    killed.record(Counts(rollouts=5, cached_rollouts=0, tokens=100, infra_rollouts=5))
    resumed = RunCounters(tmp_path)
    totals = resumed.total(Counts(rollouts=3, cached_rollouts=2, tokens=60, infra_rollouts=5))
    assert totals == Counts(rollouts=8, cached_rollouts=2, tokens=160, infra_rollouts=10)


def test_an_entry_written_before_infra_rollouts_existed_reads_as_zero():
    assert Counts.from_json({"rollouts": 2, "cached_rollouts": 1, "tokens": 9}) == Counts(2, 1, 9, 0)
