"""A finished cell's result file (``cells/<arm>/seed-<n>/result.json``, version 1): written once,
atomically, when the cell finished, so a killed cell never has one; read back field by field
(a bad field names the file and the field, exit 2).

    version, arm {name, kind, config}, seed,
    benchmark {name, spec, test_tasks, test_sha}, model {name, sha256}, scorer {...},
    seed_harness (content hash), harness (the arm's final harness's content hash),
    tasks {task id: score on the test split}    best-of-k: the self-consistent pick's score
    oracle {task id: score} | null              best-of-k only: the best of the k samples
    rollouts, tokens                            what making the arm's harness spent (evolve: the
                                                run; best-of-k: its k samples per task; gepa: its
                                                search; else 0)
    cost_usd                                    what every model call of the cell cost, making and
                                                scoring (0 for local and scripted models; absent
                                                in older files: 0)
    test {rollouts, cached, tokens, infra}      what scoring on the test split ran
    details {...}                               per kind (k, matched_to, run_id, accepted, ...)
    wall_s, attempts, load_average {start, end}, command, harnessevolve {version, commit},
    finished_at
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessevolve.compare.arm_spec import ARM_KINDS
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.files import atomic_write_json, read_json

RESULT_VERSION = 1
RESULT_FILE = "result.json"


class ResultFileError(HarnessEvolveError):
    """A cell's result file cannot be read as one."""

    default_hint = "a result file is written by `harnessevolve compare`; rerun that cell (delete its folder)"


@dataclass(frozen=True)
class CellResult:
    arm: str
    kind: str
    seed: int
    arm_config: dict[str, Any]
    benchmark: dict[str, Any]
    model: dict[str, Any]
    scorer: dict[str, Any]
    seed_harness: str
    harness: str
    tasks: dict[str, float]
    rollouts: int
    tokens: int
    oracle: dict[str, float] | None = None
    cost_usd: float = 0.0
    test: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    attempts: int = 1
    load_average: dict[str, Any] = field(default_factory=dict)
    command: str = ""
    harnessevolve: dict[str, Any] = field(default_factory=dict)
    finished_at: str = ""
    resolved: dict[str, Any] | None = None
    """evolve: the run's defaults as resolved (``compare/resolved.py``); None in other arms and in
    cells made before it was recorded."""
    path: Path | None = field(default=None, compare=False)
    """The file it was read from (None: not read from a file)."""

    @property
    def cell_id(self) -> str:
        return f"{self.arm}/seed-{self.seed}"

    @property
    def score(self) -> float:
        """Mean score over the test tasks."""
        return math.fsum(self.tasks.values()) / len(self.tasks) if self.tasks else 0.0

    @property
    def where(self) -> str:
        return str(self.path) if self.path is not None else self.cell_id

    def to_json(self) -> dict[str, Any]:
        arm: dict[str, Any] = {"name": self.arm, "kind": self.kind, "config": self.arm_config}
        if self.resolved is not None:
            arm["resolved"] = self.resolved
        return {
            "version": RESULT_VERSION,
            "arm": arm,
            "seed": self.seed,
            "benchmark": self.benchmark,
            "model": self.model,
            "scorer": self.scorer,
            "seed_harness": self.seed_harness,
            "harness": self.harness,
            "score": round(self.score, 6),
            "tasks": self.tasks,
            "oracle": self.oracle,
            "rollouts": self.rollouts,
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 8),
            "test": self.test,
            "details": self.details,
            "wall_s": round(self.wall_s, 3),
            "attempts": self.attempts,
            "load_average": self.load_average,
            "command": self.command,
            "harnessevolve": self.harnessevolve,
            "finished_at": self.finished_at,
        }


def write_result(path: Path, result: CellResult) -> None:
    """The cell's result, atomically: a reader sees no file or the whole one."""
    atomic_write_json(path, result.to_json())


def read_result(path: Path) -> CellResult:
    """A result file, checked field by field (``ResultFileError`` names the file and field)."""
    doc = read_json(path, error=ResultFileError)
    where = str(path)

    def bad(name: str, message: str) -> ResultFileError:
        return ResultFileError(message, file=where, field=name)

    if not isinstance(doc, dict):
        raise ResultFileError("not a result file (a JSON object)", file=where)
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise bad("version", f"must be a whole number, not {version!r}")
    if version > RESULT_VERSION:
        raise bad("version", f"version {version} is newer than this harnessevolve reads ({RESULT_VERSION})")
    arm = _mapping(doc, "arm", bad)
    name, kind = arm.get("name"), arm.get("kind")
    if not isinstance(name, str) or not name:
        raise bad("arm.name", f"must be the arm's name, not {name!r}")
    if kind not in ARM_KINDS:
        raise bad("arm.kind", f"must be one of {', '.join(ARM_KINDS)}, not {kind!r}")
    return CellResult(
        arm=name,
        kind=kind,
        seed=_count(doc, "seed", bad),
        arm_config=_mapping(arm, "config", bad, prefix="arm."),
        benchmark=_mapping(doc, "benchmark", bad),
        model=_mapping(doc, "model", bad),
        scorer=_mapping(doc, "scorer", bad),
        seed_harness=_text(doc, "seed_harness", bad),
        harness=_text(doc, "harness", bad),
        tasks=_scores(doc.get("tasks"), "tasks", bad, empty=False),
        oracle=_scores(doc["oracle"], "oracle", bad) if doc.get("oracle") is not None else None,
        rollouts=_count(doc, "rollouts", bad),
        tokens=_count(doc, "tokens", bad),
        cost_usd=_number(doc, "cost_usd", bad) if "cost_usd" in doc else 0.0,
        test=_mapping(doc, "test", bad),
        details=_mapping(doc, "details", bad),
        wall_s=_number(doc, "wall_s", bad),
        attempts=_count(doc, "attempts", bad),
        load_average=_mapping(doc, "load_average", bad),
        command=_text(doc, "command", bad, empty=True),
        harnessevolve=_mapping(doc, "harnessevolve", bad),
        finished_at=_text(doc, "finished_at", bad, empty=True),
        resolved=_mapping(arm, "resolved", bad, prefix="arm.") if arm.get("resolved") is not None else None,
        path=path,
    )


Bad = Any  # Callable[[str, str], ResultFileError]


def _mapping(doc: dict[str, Any], name: str, bad: Bad, prefix: str = "") -> dict[str, Any]:
    value = doc.get(name)
    if not isinstance(value, dict):
        raise bad(prefix + name, f"must be an object, not {type(value).__name__}")
    return value


def _count(doc: dict[str, Any], name: str, bad: Bad) -> int:
    value = doc.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise bad(name, f"must be a whole number >= 0, not {value!r}")
    return value


def _number(doc: dict[str, Any], name: str, bad: Bad) -> float:
    value = doc.get(name)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise bad(name, f"must be a number >= 0, not {value!r}")
    return float(value)


def _text(doc: dict[str, Any], name: str, bad: Bad, *, empty: bool = False) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or (not value and not empty):
        raise bad(name, f"must be a string, not {value!r}")
    return value


def _scores(value: Any, name: str, bad: Bad, *, empty: bool = True) -> dict[str, float]:
    if not isinstance(value, dict) or (not value and not empty):
        raise bad(name, "must be an object of task id -> score")
    out: dict[str, float] = {}
    for task, score in value.items():
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
            raise bad(f"{name}.{task}", f"a score is a number from 0 to 1, not {score!r}")
        out[str(task)] = float(score)
    return out
