"""``synthesize(repo, out, ...)``: mutate a repository's source into tasks with their own checkers.

1. Read the repository's text files (``read_repository``); it must have tests and source.
2. Run the suite twice on the original, in the sandbox. Tests that pass both times are the
   *stable* set; tests that fail, or pass only once (flaky), are left out and counted.
3. Draw mutation sites (``synth.mutate``) in a seeded order; a task takes ``mutations`` of them
   (non-overlapping, in distinct functions). Each mutant's suite runs in the sandbox; it is kept
   only when it fails a non-empty, specific (at most ``MAX_FAILING_SHARE`` of the stable set) set of
   stable tests and a second run fails the very same set. Duplicates (the same resulting source,
   or the same function failing the same tests) are dropped.
4. Kept mutants get splits from ``adapters.suite.assign_splits`` and become native task files under
   ``out/tasks/``; ``out/benchmark.yaml`` and ``out/synthesis.json`` (what was tried, kept and
   rejected and why, each task's difficulty, the time per kept task) are written beside them.

Nothing is written outside ``out``; the same repository, options and seed give the same tasks.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from harnessevolve.adapters.suite import assign_splits
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.files import atomic_write_json, atomic_write_text
from harnessevolve.sandbox.base import Sandbox
from harnessevolve.synth.mutate import Mutation, apply, find_mutations, overlaps
from harnessevolve.synth.task_writer import KeptMutant, call_depth, task_document
from harnessevolve.synth.testrun import SuiteRun, run_suite

SYNTHESIS_VERSION = 1
MAX_FILE_BYTES = 256_000
MAX_REPO_BYTES = 2_000_000
MAX_FAILING_SHARE = 0.5
"""A mutant failing more than this share of the stable tests breaks the module, not a behaviour."""
SKIP_DIRS = frozenset(
    {".git", "__pycache__", "build", "dist", "docs", ".tox", ".venv", "venv", "node_modules"}
)
_NOT_ID = re.compile(r"[^a-z0-9]+")


class SynthesisError(BenchmarkError):
    """The repository cannot be synthesized from (no tests, tests failing, not a folder...)."""

    default_hint = "pass --repo a folder with a Python package and its test suite (test*.py files)"


@dataclass(frozen=True)
class SynthesisOptions:
    count: int = 20
    seed: int = 0
    mutations: int = 1
    """Mutations per task (more = harder)."""
    max_tries: int = 0
    """Mutants to try at most (0: 15 per wanted task)."""
    timeout_s: float = 60.0
    jobs: int = 2
    name: str = ""
    """Prefix of the task ids (default: the repository folder's name without a version suffix)."""


@dataclass
class SynthesisReport:
    repo: str
    tried: int = 0
    kept: list[KeptMutant] = field(default_factory=list)
    rejected: Counter[str] = field(default_factory=Counter)
    dropped_tests: dict[str, str] = field(default_factory=dict)
    stable_tests: int = 0
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "version": SYNTHESIS_VERSION,
            "repo": self.repo,
            "tried": self.tried,
            "kept": len(self.kept),
            "rejected": dict(sorted(self.rejected.items())),
            "stable_tests": self.stable_tests,
            "dropped_tests": self.dropped_tests,
            "seconds": round(self.seconds, 2),
            "seconds_per_kept_task": round(self.seconds / len(self.kept), 2) if self.kept else None,
            "tasks": {
                k.task_id: {
                    "difficulty": k.difficulty,
                    "failing_tests": list(k.failing),
                    "mutations": [m.describe() for m in k.mutations],
                }
                for k in self.kept
            },
        }


def is_test_file(name: str) -> bool:
    path = PurePosixPath(name)
    return path.suffix == ".py" and (
        path.name.startswith("test")
        or path.name.endswith("_test.py")
        or path.name == "conftest.py"
        or any(part in ("tests", "test") for part in path.parts[:-1])
    )


def read_repository(repo: Path) -> dict[str, str]:
    """Relative POSIX path -> text of every text file the tasks need (symlinks and binary files
    skipped, hidden and build folders left out)."""
    if not repo.is_dir():
        raise SynthesisError(f"{repo} is not a folder", field="--repo")
    files: dict[str, str] = {}
    total = 0
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo)
        if any(part in SKIP_DIRS or part.startswith(".") for part in rel.parts) or path.is_symlink():
            continue
        if not path.is_file() or path.suffix in (".pyc", ".pyo", ".so"):
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        total += len(text)
        if total > MAX_REPO_BYTES:
            raise SynthesisError(
                f"the repository's text files pass {MAX_REPO_BYTES // 1000} kB",
                file=str(repo),
                hint="every task carries the whole repository: point --repo at a smaller package",
            )
        files[rel.as_posix()] = text
    if not any(is_test_file(n) for n in files):
        raise SynthesisError("the repository has no tests (no test*.py or tests/ files)", file=str(repo))
    if not source_files(files):
        raise SynthesisError("the repository has no Python source outside its tests", file=str(repo))
    return files


def source_files(files: dict[str, str]) -> list[str]:
    return [
        n
        for n in sorted(files)
        if n.endswith(".py") and not is_test_file(n) and PurePosixPath(n).name != "setup.py"
    ]


def task_prefix(name: str) -> str:
    """``semantic_version-2.10.0`` -> ``semantic-version``: lowercase, version suffix dropped."""
    base = re.sub(r"[-_]v?\d+(\.\d+)*$", "", name.strip())
    return _NOT_ID.sub("-", base.lower()).strip("-") or "repo"


def _task_id(repo_name: str, mutations: tuple[Mutation, ...]) -> str:
    digest = hashlib.sha256("\n".join(m.describe() for m in mutations).encode()).hexdigest()[:8]
    return f"{repo_name}-{digest}"


def _draw(pool: list[Mutation], rng: random.Random, k: int) -> tuple[Mutation, ...] | None:
    """``k`` mutations from ``pool`` in distinct functions, none overlapping (None when impossible)."""
    if k == 1:
        return (pool.pop(),) if pool else None
    chosen: list[Mutation] = []
    for candidate in rng.sample(pool, min(len(pool), 50 * k)):
        if all(candidate.function != c.function and not overlaps(candidate, c) for c in chosen):
            chosen.append(candidate)
            if len(chosen) == k:
                return tuple(chosen)
    return None


async def _baseline(
    files: dict[str, str], opts: SynthesisOptions, sandbox: Sandbox | None, report: SynthesisReport
):
    first, second = await asyncio.gather(
        run_suite(files, timeout_s=opts.timeout_s, sandbox=sandbox),
        run_suite(files, timeout_s=opts.timeout_s, sandbox=sandbox),
    )
    for run in (first, second):
        if run.error:
            raise SynthesisError(
                f"the test suite does not run on the original: {run.error}",
                field="--repo",
                hint="make `python3 -m unittest` pass in the repository first (or raise --timeout)",
            )
    stable = first.passing() & second.passing()
    for tid in sorted(set(first.outcomes) | set(second.outcomes)):
        if tid in stable:
            continue
        a, b = first.outcomes.get(tid), second.outcomes.get(tid)
        statuses = {o.status for o in (a, b) if o}
        report.dropped_tests[tid] = (
            "flaky" if "passed" in statuses else next(iter(statuses - {"passed"}), "failed")
        )
    if not stable:
        raise SynthesisError(
            "no test passes on the original repository", field="--repo", hint="fix the failing tests first"
        )
    report.stable_tests = len(stable)
    return stable


async def _judge(
    files: dict[str, str],
    mutations: tuple[Mutation, ...],
    stable: frozenset[str],
    opts: SynthesisOptions,
    sandbox: Sandbox | None,
) -> tuple[str, SuiteRun | None, frozenset[str]]:
    """(verdict, the run, the failing set): ``kept`` or the reason it was rejected."""
    mutant = dict(files)
    for name in {m.file for m in mutations}:
        mutant[name] = apply(files[name], [m for m in mutations if m.file == name])
    run = await run_suite(mutant, timeout_s=opts.timeout_s, sandbox=sandbox)
    if run.timed_out:
        return "hangs", None, frozenset()
    if run.error:
        return "runner error", None, frozenset()
    failing = frozenset(
        t for t in stable if run.outcomes.get(t) is None or run.outcomes[t].status != "passed"
    )
    if not failing:
        return "survived (no test fails)", run, failing
    if len(failing) > MAX_FAILING_SHARE * len(stable) and len(stable) > 2:
        return "too broad (breaks most tests)", run, failing
    again = await run_suite(mutant, timeout_s=opts.timeout_s, sandbox=sandbox)
    again_failing = frozenset(
        t for t in stable if again.outcomes.get(t) is None or again.outcomes[t].status != "passed"
    )
    if again_failing != failing:
        return "unstable (failing set changed on a rerun)", run, failing
    return "kept", run, failing


async def synthesize(
    repo: Path,
    out: Path,
    opts: SynthesisOptions,
    *,
    sandbox: Sandbox | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> SynthesisReport:
    started = time.monotonic()
    files = read_repository(repo)
    repo_name = task_prefix(opts.name or repo.resolve().name)
    report = SynthesisReport(repo=repo.resolve().name)
    stable = frozenset(await _baseline(files, opts, sandbox, report))
    rng = random.Random(f"{opts.seed}:{repo_name}")
    pool = [m for name in source_files(files) for m in find_mutations(name, files[name])]
    rng.shuffle(pool)
    max_tries = opts.max_tries or 15 * opts.count
    seen_sources: set[str] = set()
    seen_behaviours: set[tuple[str, frozenset[str]]] = set()
    while len(report.kept) < opts.count and report.tried < max_tries:
        batch: list[tuple[Mutation, ...]] = []
        while len(batch) < opts.jobs and report.tried + len(batch) < max_tries:
            drawn = _draw(pool, rng, opts.mutations)
            if drawn is None:
                break
            key = hashlib.sha256(
                repr(sorted((m.file, m.start, m.replacement) for m in drawn)).encode()
            ).hexdigest()
            if key in seen_sources:
                continue
            seen_sources.add(key)
            batch.append(drawn)
        if not batch:
            break
        verdicts = await asyncio.gather(*(_judge(files, b, stable, opts, sandbox) for b in batch))
        for mutations, (verdict, run, failing) in zip(batch, verdicts, strict=True):
            report.tried += 1
            behaviour = ("|".join(sorted(m.function for m in mutations)), failing)
            if verdict == "kept" and behaviour in seen_behaviours:
                verdict = "duplicate (same function, same failing tests)"
            if verdict != "kept" or len(report.kept) >= opts.count:
                report.rejected[verdict if verdict != "kept" else "over --count"] += 1
                continue
            seen_behaviours.add(behaviour)
            assert run is not None
            ordered = tuple(sorted(failing))
            details = {t: run.outcomes[t].detail for t in ordered if t in run.outcomes}
            depth = call_depth(details.get(ordered[0], ""), source_files(files))
            report.kept.append(KeptMutant(_task_id(repo_name, mutations), mutations, ordered, details, depth))
        if on_progress:
            on_progress(len(report.kept), report.tried)
    if not report.kept:
        raise SynthesisError(
            f"no mutant was kept out of {report.tried} tried ({dict(report.rejected)})",
            field="--repo",
            hint="raise --max-tries, or the repository's tests may not check its behaviour",
        )
    report.seconds = time.monotonic() - started
    write_suite(out, report, files, sorted(stable), repo_name, opts)
    return report


def _render(doc: dict[str, Any]) -> str:
    class Dumper(yaml.SafeDumper):  # type: ignore[misc]  # (yaml has no stubs here)
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    Dumper.add_representer(str, text)
    header = "# Generated by `harnessevolve tasks synthesize`; rerun it rather than editing this file.\n"
    return header + yaml.dump(doc, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=100)


def write_suite(
    out: Path,
    report: SynthesisReport,
    files: dict[str, str],
    stable: list[str],
    repo_name: str,
    opts: SynthesisOptions,
) -> None:
    tasks_dir = out / "tasks"
    tasks_dir.mkdir(parents=True, exist_ok=True)
    (out / "trajectories").mkdir(exist_ok=True)  # so `refs import` writes the references here
    for stale in tasks_dir.glob(f"{repo_name}-*.yaml"):
        stale.unlink()
    test_files = {n: t for n, t in files.items() if n.endswith(".py") and n not in source_files(files)}
    splits = assign_splits([k.task_id for k in report.kept])
    for kept in report.kept:
        doc = task_document(
            kept,
            files=files,
            test_files=test_files,
            stable_passing=stable,
            split=splits[kept.task_id],
            repo_name=repo_name,
        )
        atomic_write_text(tasks_dir / f"{kept.task_id}.yaml", _render(doc))
    meta = out / "benchmark.yaml"
    if not meta.exists():
        atomic_write_text(
            meta,
            _render(
                {
                    "version": 1,
                    "name": out.resolve().name,
                    "description": f"Bugs synthesized by AST mutation of {report.repo}; each task's checker "
                    "runs the tests the bug breaks and the rest of the suite, in the sandbox.",
                }
            ),
        )
    atomic_write_json(out / "synthesis.json", {**report.as_json(), "options": opts.__dict__, "split": splits})


def summary_lines(report: SynthesisReport) -> list[str]:
    per = f"{report.seconds / len(report.kept):.2f} s" if report.kept else "-"
    lines = [
        f"{report.stable_tests} stable tests; {len(report.dropped_tests)} left out "
        "(failing or flaky on the original)",
        f"mutants tried {report.tried}, kept {len(report.kept)}, rejected {sum(report.rejected.values())}",
        *[f"  rejected, {reason}: {n}" for reason, n in sorted(report.rejected.items())],
        f"{report.seconds:.1f} s in all, {per} per kept task",
    ]
    return lines


def dumps(report: SynthesisReport) -> str:
    return json.dumps(report.as_json(), indent=2)
