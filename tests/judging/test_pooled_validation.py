"""The pooled gate scores validation in slices as wide as the executor runs at once and stops as
soon as no outcome of the tasks left could get the candidate accepted: a candidate that lost its
batch does not spend a whole validation split's rollouts to be refused."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.tasks import Benchmark, Check, Task
from harnessevolve.gate.config import load_gate_config
from harnessevolve.harness.load import load_harness
from harnessevolve.judging.judge import CandidateJudge, Judgement
from harnessevolve.scoring.scorer import TaskResult


@dataclass
class Executor:
    concurrency: int = 2


@dataclass
class FakeScorer:
    """Scores by harness name: ``scores[name][task id]``; records every task it was asked for."""

    scores: dict[str, dict[str, float]]
    executor: Executor = field(default_factory=Executor)
    asked: list[tuple[str, str]] = field(default_factory=list)

    async def score(self, harness, tasks, label):  # noqa: ANN001, ANN201 - the Scorer's signature
        results = []
        for task in tasks:
            self.asked.append((harness.name, task.id))
            value = self.scores[harness.name][task.id]
            trajectory = Trajectory(
                session_id="s", agent_name="a", agent_version="0", model_name="m", steps=()
            )
            results.append(TaskResult(task.id, value, value >= 1.0, None, trajectory, 0))
        return results


def task(task_id: str, split: str) -> Task:
    return Task(task_id, "do it", split, (Check(type="answer", expected="x"),))


@pytest.fixture
def pair(harness_dir: Path, tmp_path: Path):  # noqa: ANN201
    current = load_harness(harness_dir)
    other = tmp_path / "candidate"
    other.mkdir()
    for path in harness_dir.rglob("*"):
        if path.is_file() and ".harnessevolve" not in path.parts and ".git" not in path.parts:
            target = other / path.relative_to(harness_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    text = (other / "harness.yaml").read_text().replace(f"name: {current.name}", "name: candidate", 1)
    (other / "harness.yaml").write_text(text)
    candidate = load_harness(other)
    assert candidate.name == "candidate" != current.name
    return current, candidate


def judge(scores: dict[str, dict[str, float]], tasks: list[Task], keep_going: bool = False):  # noqa: ANN201
    scorer = FakeScorer(scores)
    benchmark = Benchmark("b", Path("."), tuple(tasks))
    gates = load_gate_config()  # the default: pooled, with the unopposed rule
    cj = CandidateJudge(
        benchmark=benchmark, scorer=scorer, gates=gates, ledger=None, seed=0, keep_going=keep_going
    )  # type: ignore[arg-type]
    return cj, scorer


def run(cj: CandidateJudge, current, candidate, batch: list[Task], scores) -> Judgement:  # noqa: ANN001
    judgement = Judgement(harness=candidate)
    cand = asyncio.run(cj.scorer.score(candidate, batch, "batch"))
    return asyncio.run(cj.pooled(current, judgement, batch, cand, {}, "g1"))


BATCH = [task(f"b{i}", "train") for i in range(2)]
VALIDATION = [task(f"v{i}", "validation") for i in range(8)]


def judged(pair, level: float, changed: dict[str, float], keep_going: bool = False):  # noqa: ANN001, ANN201
    """Both harnesses score ``level`` on every task but the candidate's ``changed`` ones; returns the
    judgement, its performance verdict and the validation tasks the candidate was scored on."""
    current, candidate = pair
    ids = [t.id for t in BATCH + VALIDATION]
    scores = {
        current.name: dict.fromkeys(ids, level),
        candidate.name: {**dict.fromkeys(ids, level), **changed},
    }
    cj, scorer = judge(scores, BATCH + VALIDATION, keep_going=keep_going)
    judgement = run(cj, current, candidate, BATCH, scores)
    perf = next(v for v in judgement.verdicts if v.gate == "performance")
    asked = [t for h, t in scorer.asked if h == candidate.name and t.startswith("v")]
    return judgement, perf, asked


def test_a_batch_loser_stops_validation_once_it_cannot_be_accepted(pair) -> None:  # noqa: ANN001
    # one loss on its batch (0W/1L) and another on the first validation slice (0W/2L)
    judgement, perf, asked = judged(pair, 1.0, {"b0": 0.0, "v0": 0.0})
    assert not perf.passed
    # after the first slice 0W/2L with 6 unseen: 6 wins would give 6-2 (p 0.145 <= 0.2), so it goes
    # on; after the second, 0W/2L with 4 unseen: 4-2 gives p 0.34, so it stops there
    assert asked == ["v0", "v1", "v2", "v3"]
    assert perf.numbers["validation_stopped"] == {"scored": 4, "unseen": 4}
    assert "stopped after 4 of 8 tasks" in perf.reason
    assert judgement.validation == []  # a partial validation score is not reported as one


def test_stops_at_the_first_slice_that_makes_acceptance_unreachable(pair) -> None:  # noqa: ANN001
    # 0W/3L after the first slice: 5 wins of the 5 left give 5-3, p 0.36
    _, perf, asked = judged(pair, 1.0, {"b0": 0.0, "v0": 0.0, "v1": 0.0})
    assert asked == ["v0", "v1"] and not perf.passed
    assert perf.numbers["validation_stopped"] == {"scored": 2, "unseen": 6}
    assert "no outcome of the other 6 could get it accepted" in perf.reason
    assert perf.numbers["sources"]["validation"] == {"wins": 0, "losses": 2, "ties": 0}
    # `harnessevolve gate` (keep_going) still scores everything, for its report
    _, _, asked = judged(pair, 1.0, {"b0": 0.0, "v0": 0.0, "v1": 0.0}, keep_going=True)
    assert len(asked) == 8


def test_a_candidate_that_can_still_pass_is_scored_on_all_of_validation(pair) -> None:  # noqa: ANN001
    judgement, perf, asked = judged(pair, 0.0, {"b1": 1.0})  # one win, no loss: unopposed so far
    assert perf.passed and "validation_stopped" not in perf.numbers
    assert len(judgement.validation) == 8 and len(asked) == 8
