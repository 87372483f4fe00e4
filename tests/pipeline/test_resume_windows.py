"""Resume windows: a run killed inside a step whose verdict is not yet in the ledger redoes that
step on ``--resume`` (the null-agent floor check), and a recorded refusal stands."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_crash_points import KILLED, _in_child, _new_harness, _run_dir, after_event
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.runs import events as ev
from harnessevolve.runs.ledger import read_ledger


def always_passing_suite(root: Path) -> Path:
    """Eight tasks per split whose checker passes whatever the agent does: the floor refuses it."""
    (root / "tasks").mkdir(parents=True)
    (root / "benchmark.yaml").write_text("version: 1\nname: always-pass\n")
    for split in ("train", "validation", "test"):
        for i in range(8):
            (root / "tasks" / f"{split}-{i}.yaml").write_text(
                f"version: 1\nid: {split}-{i}\nsplit: {split}\ninstruction: Say done.\n"
                "checker:\n  - {type: command, run: 'true'}\n"
            )
    return root


def run_args(harness: Path, bench: Path) -> list[str]:
    return ["run", "-H", str(harness), "-b", str(bench), "-n", "1", "--batch-size", "2",
            "-m", "scripted/policy:gives_up", "--unsafe-no-sandbox"]  # fmt: skip


def test_crash_point_inside_the_floor_check_redoes_it_on_resume(tmp_path: Path) -> None:
    bench = always_passing_suite(tmp_path / "bench")
    fresh = CliRunner().invoke(app, run_args(_new_harness(tmp_path, "fresh"), bench))
    assert fresh.exit_code == 2 and "null agents" in fresh.output, fresh.output  # a fresh run refuses
    harness = _new_harness(tmp_path, "killed")

    def doomed() -> None:
        with pytest.MonkeyPatch.context() as patch:
            after_event(ev.RunStarted.NAME)(patch)  # killed before the floor's verdict was recorded
            CliRunner().invoke(app, run_args(harness, bench))

    assert _in_child(doomed) == KILLED
    run = _run_dir(harness).name
    resumed = CliRunner().invoke(app, ["run", "-H", str(harness), "--resume", run])
    assert resumed.exit_code == 2, resumed.output
    events = read_ledger(_run_dir(harness) / "ledger.jsonl")
    floors = [e for e in events if isinstance(e, ev.FloorChecked)]
    assert len(floors) == 1 and floors[0].refused  # redone on resume, and refused as a fresh run is
    assert not any(isinstance(e, ev.Baseline) for e in events)  # nothing evolved on it
    again = CliRunner().invoke(app, ["run", "-H", str(harness), "--resume", run])
    assert again.exit_code == 2 and "refused at its start" in again.output, again.output


class EarlierIsBest:
    """A snapshot selector that finds the one before the latest best (its validation raised above
    any other), so the run's epoch end restores it: the restore window exercised without a
    benchmark where validation must fall."""

    def __init__(self, _inputs: object) -> None:
        pass

    def select(self, pool):  # type: ignore[no-untyped-def]
        import dataclasses

        return dataclasses.replace(pool.snapshots[max(0, len(pool.snapshots) - 2)], validation=2.0)


@pytest.mark.parametrize(
    "point",
    ["after-epoch-restoring", "inside-restore", "after-restore-commit"],
)
def test_crash_point_inside_the_epoch_end_restore_finishes_it_on_resume(
    point: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import test_crash_points as crash
    from bench_subset import shell_basics_subset
    from policies import TogglePrompt

    from harnessevolve.harness import git as harness_git
    from harnessevolve.optimize import registry
    from harnessevolve.pipeline import policies

    monkeypatch.setitem(registry.PROPOSERS, "toggle", TogglePrompt)
    monkeypatch.setitem(policies.SELECTORS, "best-validation", EarlierIsBest)
    bench = shell_basics_subset(tmp_path / "bench" / "shell-basics", ("count-lines",))
    reference = _new_harness(tmp_path, "reference")
    ran = CliRunner().invoke(app, crash._args(reference, bench, "paper"))
    assert ran.exit_code in (0, 1), ran.output
    expected = crash.normalized(reference)
    restores = [
        e for e in read_ledger(_run_dir(reference) / "ledger.jsonl") if isinstance(e, ev.EpochRestoring)
    ]
    assert restores, "the scenario must restore a snapshot at an epoch's end"

    def inside_restore(patch: pytest.MonkeyPatch) -> None:
        """Kill after git restored the files, before the restoring commit (a dirty harness)."""
        real = harness_git.HarnessRepo.commit_all

        def commit_all(self, message: str) -> str:  # type: ignore[no-untyped-def]
            if message.startswith("harnessevolve: restore snapshot"):
                crash._die()
            return real(self, message)

        patch.setattr(harness_git.HarnessRepo, "commit_all", commit_all)

    def after_restore_commit(patch: pytest.MonkeyPatch) -> None:
        real = harness_git.HarnessRepo.restore

        def restore(self, sha: str, message: str):  # type: ignore[no-untyped-def]
            real(self, sha, message)
            crash._die()

        patch.setattr(harness_git.HarnessRepo, "restore", restore)

    faults = {
        "after-epoch-restoring": after_event(ev.EpochRestoring.NAME),
        "inside-restore": inside_restore,
        "after-restore-commit": after_restore_commit,
    }
    harness, resumed = crash.crash_and_resume(tmp_path, bench, "paper", point, faults[point])
    assert resumed.exit_code in (0, 1), resumed.output
    assert crash.normalized(harness) == expected


@pytest.mark.parametrize("nth", [3, 7])
def test_crash_point_between_ledger_events_keeps_the_run_counters_exact(
    nth: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed right after its ``nth`` rollout (between two ledger events, e.g. mid-gate), a resumed
    run's ``run_finished`` loses no rollout or token the killed process ran: at least the
    uninterrupted run's counts (more when a rollout that cannot be cached ran again), and no more
    tokens than the model calls metered (the spend, exact across kills)."""
    import test_crash_points as crash
    from bench_subset import shell_basics_subset
    from policies import TogglePrompt

    from harnessevolve.optimize import registry
    from harnessevolve.scoring.scorer import Scorer

    monkeypatch.setitem(registry.PROPOSERS, "toggle", TogglePrompt)
    bench = shell_basics_subset(tmp_path / "bench" / "shell-basics", ("count-lines",))
    reference = _new_harness(tmp_path, "reference")
    assert CliRunner().invoke(app, crash._args(reference, bench, "")).exit_code in (0, 1)

    def after_rollout(patch: pytest.MonkeyPatch) -> None:
        """Kill as the ``nth`` rollout's result is returned: scored, cached and counted."""
        real, seen = Scorer._evaluate, [0]

        def evaluate(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            result = real(self, *args, **kwargs)
            seen[0] += 1
            if seen[0] == nth:
                crash._die()
            return result

        patch.setattr(Scorer, "_evaluate", evaluate)

    harness, resumed = crash.crash_and_resume(tmp_path, bench, "", f"killed-{nth}", after_rollout)
    assert resumed.exit_code in (0, 1), resumed.output

    def finished(h: Path) -> ev.RunFinished:
        (end,) = [e for e in read_ledger(_run_dir(h) / "ledger.jsonl") if isinstance(e, ev.RunFinished)]
        return end

    got, ran = finished(harness), finished(reference)
    metered = sum(row.get("tokens", 0) for row in (got.usage or {}).get("by_stage", {}).values())
    assert (got.rollouts or 0) >= (ran.rollouts or 0)
    assert (ran.tokens or 0) <= (got.tokens or 0) <= metered
