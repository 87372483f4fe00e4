"""Infrastructure failures apart: a rollout whose sandbox fails to start is ``infra`` (scored 0,
counted apart, retried once, never cached); a run they dominate stops with exit code 3."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.core.atif import Step, Trajectory
from harnessevolve.core.errors import InfraFailureError, SandboxError
from harnessevolve.core.infra import infra_reason
from harnessevolve.core.tasks import Benchmark
from harnessevolve.execute.executor import LocalExecutor
from harnessevolve.harness.load import load_harness
from harnessevolve.runs.ledger import read_lines
from harnessevolve.sandbox import base as sandbox_base
from harnessevolve.sandbox.base import UnsafeNoSandbox
from harnessevolve.sandbox.launch import Launch
from harnessevolve.scoring.infra import InfraFailure, InfraTally
from harnessevolve.scoring.rollout_cache import RolloutCache
from harnessevolve.scoring.scorer import Scorer


class FailingSandbox(UnsafeNoSandbox):
    """A sandbox that cannot launch anything in the workspaces of the tasks named in ``broken``
    (every task when ``broken`` is None); the others run unisolated. Counts its launches."""

    name = "failing"
    broken: tuple[str, ...] | None = None
    refused: list[str] = []

    @contextlib.contextmanager
    def launch(
        self, command: str, workspace: Path, env: Mapping[str, str], *, read_only=()
    ) -> Iterator[Launch]:
        task = next((t for t in self.broken or () if f"he-{t}-" in workspace.name), None)
        if self.broken is None or task is not None:
            type(self).refused.append(workspace.name)
            raise SandboxError("bwrap: setting up uid map: Permission denied (fake)")
        with super().launch(command, workspace, env, read_only=read_only) as launch:
            yield launch


def runs_a_command(messages, tools) -> dict:
    """A scripted agent that runs one shell command (through the sandbox), then submits."""
    if not any(m["role"] == "assistant" for m in messages):
        return {"tool_calls": [{"name": "bash", "arguments": {"command": "wc -l list.txt"}}]}
    return {"tool_calls": [{"name": "submit", "arguments": {"answer": "11"}}]}


@pytest.fixture
def commander(scripts) -> str:
    return scripts("commander", runs_a_command)


@pytest.fixture
def failing_sandbox(monkeypatch: pytest.MonkeyPatch):
    def make(broken: tuple[str, ...] | None) -> type[FailingSandbox]:
        cls = type("Failing", (FailingSandbox,), {"broken": broken, "refused": []})
        monkeypatch.setitem(sandbox_base.SANDBOXES, "bwrap", cls)
        return cls

    return make


def test_infra_reason_names_machine_failures_and_not_agent_ones() -> None:
    def traj(stop: str, error: str = "", **extra) -> Trajectory:
        steps = (Step(1, "agent", "", extra={"error": error}),) if error else ()
        return Trajectory("s", "a", "1", "m", steps, extra={"stop_reason": stop, **extra})

    assert infra_reason(traj("sandbox_error")) == "sandbox_start"
    assert infra_reason(traj("tool_error")) == "tool_server"
    assert infra_reason(traj("model_error", "model_error: InternalServerError: 503 overloaded")) == "endpoint"
    assert infra_reason(traj("model_error", "model_error: BadRequestError: context window exceeded")) is None
    assert infra_reason(traj("agent_crashed", infra="killed")) == "killed"
    for agent_stop in ("submitted", "step_limit", "agent_crashed", "agent_timeout", "no_answer"):
        assert infra_reason(traj(agent_stop)) is None


def test_tally_stops_only_when_machine_failures_dominate() -> None:
    tally = InfraTally(0.5)
    for _ in range(3):
        tally.counted()
    tally.failed(InfraFailure("t", "h", "sandbox_start", "", retry=True))  # retried: does not count
    tally.check()
    tally.failed(InfraFailure("t", "h", "sandbox_start", "", retry=False))
    tally.counted()
    assert (tally.failures, tally.rollouts, tally.retried) == (1, 4, 1)
    tally.check()  # 1 of 4: fine
    for _ in range(3):
        tally.failed(InfraFailure("u", "h", "endpoint", "", retry=False))
        tally.counted()
    with pytest.raises(InfraFailureError) as caught:
        tally.check()
    assert caught.value.exit_code == 3
    assert "4 of 7 rollouts failed on the machine" in caught.value.message


def test_a_rollout_whose_sandbox_fails_is_infra_retried_once_and_not_cached(
    tmp_path: Path, harness_dir: Path, shell_basics: Benchmark, commander: str
) -> None:
    tasks = list(shell_basics.split("train")[:3])
    broken = tasks[0].id
    sandbox = type("Failing", (FailingSandbox,), {"broken": (broken,), "refused": []})()
    failures: list[InfraFailure] = []
    cache = RolloutCache(tmp_path / "cache")
    scorer = Scorer(
        LocalExecutor(1, sandbox),
        model=commander,
        seed=0,
        references={},
        cache=cache,
        infra=InfraTally(1.0, on_failure=failures.append),
    )
    results = asyncio.run(scorer.score(load_harness(harness_dir), tasks, "batch"))
    by_id = {r.task_id: r for r in results}
    assert by_id[broken].infra == "sandbox_start"
    assert by_id[broken].score == 0 and not by_id[broken].passed and by_id[broken].signal is None
    assert all(by_id[t.id].infra is None for t in tasks[1:])
    # one failed attempt retried, then the retry stands; the agent's own failures are not retried
    assert [(f.task_id, f.retry) for f in failures] == [(broken, True), (broken, False)]
    assert len(type(sandbox).refused) == 2
    assert scorer.infra.to_dict()["reasons"] == {"sandbox_start": 1}
    assert scorer.infra.rollouts == 3
    # an infra rollout is never cached: a later scoring tries it again
    assert not any(f"{broken}" in p.read_text() for p in (tmp_path / "cache").rglob("*.json"))


def test_a_rollout_whose_checks_cannot_start_their_sandbox_is_infra_and_retried(
    harness_dir: Path, scripts
) -> None:
    from harnessevolve.core.tasks import load_benchmark

    tasks = list(load_benchmark("shell-onecall").split("train")[:2])  # file and command checks
    broken = tasks[0].id
    sandbox = type("Failing", (FailingSandbox,), {"broken": (broken,), "refused": []})()
    submits = scripts(
        "submits", lambda m, t: {"tool_calls": [{"name": "submit", "arguments": {"answer": "x"}}]}
    )
    failures: list[InfraFailure] = []
    scorer = Scorer(
        LocalExecutor(1, sandbox),
        model=submits,
        seed=0,
        references={},
        infra=InfraTally(1.0, on_failure=failures.append),
    )
    results = asyncio.run(scorer.score(load_harness(harness_dir), tasks, "batch"))
    assert results[0].infra == "sandbox_start" and results[0].score == 0
    assert results[1].infra is None
    assert [(f.task_id, f.retry) for f in failures] == [(broken, True), (broken, False)]
    assert (scorer.infra.rollouts, scorer.infra.failures, scorer.infra.retried) == (2, 1, 1)


def test_a_rollout_whose_judge_model_fails_is_infra_and_retried_not_an_agent_failure(
    harness_dir: Path, scripts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge check whose model call fails could not run: the machine failed, not the agent (no
    error signal for it: without a reference it was once labelled a wrong argument)."""
    from dataclasses import replace

    from harnessevolve.core.tasks import Check, load_benchmark

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "judge-cache"))

    def down(messages, tools):
        raise ConnectionError("judge endpoint unreachable (fake)")

    judge = scripts("judge-down", down)
    task = load_benchmark("shell-onecall").split("train")[0]
    task = replace(task, checks=(Check(type="judge", assertion="The agent answered.", model=judge),))
    submits = scripts(
        "submits", lambda m, t: {"tool_calls": [{"name": "submit", "arguments": {"answer": "x"}}]}
    )
    failures: list[InfraFailure] = []
    scorer = Scorer(
        LocalExecutor(1, UnsafeNoSandbox()),
        model=submits,
        seed=0,
        references={},
        infra=InfraTally(1.0, on_failure=failures.append),
    )
    (result,) = asyncio.run(scorer.score(load_harness(harness_dir), [task], "batch"))
    assert result.infra == "judge" and result.score == 0 and result.signal is None
    assert [(f.task_id, f.retry) for f in failures] == [(task.id, True), (task.id, False)]
    detail = failures[-1].detail
    assert detail.startswith("judge scripted/judge-down failed: ") and "unreachable (fake)" in detail
    assert "\n" not in detail  # one line, never a traceback
    assert scorer.infra.to_dict()["reasons"] == {"judge": 1}


def test_run_summary_counts_a_sandbox_that_fails_to_start_as_infra_not_as_an_agent_failure(
    harness_dir: Path, cli, commander: str, shell_basics: Benchmark, failing_sandbox
) -> None:
    broken = shell_basics.split("validation")[0].id
    failing_sandbox((broken,))
    result = cli.invoke(app, run_args(harness_dir, commander, "-n", "1", "--floor-sample", "0"))
    assert result.exit_code in (0, 1), result.output
    assert not isinstance(result.exception, Exception), repr(result.exception)
    runs = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    lines = read_lines(runs[0] / "ledger.jsonl")
    infra = [line for line in lines if line["event"] == "infra_failure"]
    assert infra and {line["task"] for line in infra} == {broken}
    standing = [line for line in infra if not line["retry"]]
    retried = [line for line in infra if line["retry"]]
    assert len(standing) == len(retried) >= 1  # each harness's rollout of it: retried once, then stands
    summary = f"infra failures (the machine, not the agent): {len(standing)} of "
    assert summary in result.output
    assert f"(sandbox_start {len(standing)}); {len(retried)} retried once" in result.output
    finished = next(line for line in lines if line["event"] == "run_finished")
    assert finished["infra"]["failures"] == len(standing)
    assert finished["infra"]["reasons"] == {"sandbox_start": len(standing)}
    # the agent failures the run reports are the others: the broken task is not among its signals
    batches = [line for line in lines if line["event"] == "batch_evaluated"]
    assert all(broken not in str(b["clusters"]) for b in batches)
    status = cli.invoke(app, ["status", "--harness", str(harness_dir)])
    assert summary in status.output


def test_a_run_whose_sandbox_cannot_start_stops_with_exit_code_3(
    harness_dir: Path, cli, commander: str, failing_sandbox
) -> None:
    failing_sandbox(None)
    result = cli.invoke(app, run_args(harness_dir, commander, "-n", "1", "--floor-sample", "0"))
    assert result.exit_code == 3, result.output
    assert "failed on the machine, not in the agent" in result.output
    assert "sandbox_start" in result.output
    runs = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    lines = read_lines(runs[0] / "ledger.jsonl")
    assert lines[-1]["event"] == "run_failed"
    assert any(line["event"] == "infra_failure" and not line["retry"] for line in lines)  # nothing lost
