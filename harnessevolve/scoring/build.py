"""The one way to build a ``Scorer``: from a run's ``ExecutionConfig`` (the executor, its sandbox
with the run's limits, and its concurrency), for ``run``, ``gate``, ``report --final`` and every
script alike.

``report --final`` builds it from the run's own recorded options (``run_started.options``), so the
sealed test split is scored in the sandbox, with the limits, executor and concurrency the run used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.tasks import Benchmark
from harnessevolve.execute.executor import Executor
from harnessevolve.execute.executors import EXECUTORS
from harnessevolve.execute.tool_server import benchmark_sandbox
from harnessevolve.models.local_pool import capped_by_cores, requested_size
from harnessevolve.runs.run_config import ExecutionConfig
from harnessevolve.sandbox.base import SandboxLimits, make_sandbox
from harnessevolve.scoring.infra import InfraTally
from harnessevolve.scoring.rollout_cache import RolloutCache
from harnessevolve.scoring.scorer import Scorer


def default_concurrency(requested: int | None, model: str) -> int:
    """Rollouts at once: as asked; else, for the embedded model, as many as its pool may hold
    (``HARNESSEVOLVE_LOCAL_POOL``, at most one per core: 1 when unset, one llama.cpp context);
    4 otherwise."""
    if requested is not None:
        return requested
    return capped_by_cores(requested_size()) if model.startswith("local/") else 4


def parse_limits(text: str | None) -> SandboxLimits | None:
    if text is None:
        return None
    try:
        return SandboxLimits.parse(text)
    except ValueError as exc:
        raise HarnessEvolveError(
            str(exc), field="--sandbox-limits", hint="e.g. --sandbox-limits cpu_s=120,memory_mb=2048"
        ) from None


def check_execution(execution: ExecutionConfig) -> None:
    """Refuse an unknown executor or unreadable sandbox limits before anything runs."""
    if execution.executor not in EXECUTORS:
        raise HarnessEvolveError(
            f"unknown executor {execution.executor!r}",
            field="--executor",
            hint=f"choose from: {', '.join(EXECUTORS)}",
        )
    parse_limits(execution.sandbox_limits)


def make_executor(execution: ExecutionConfig, benchmark: Benchmark, model: str) -> Executor:
    """The executor, with its sandbox checked to work here (and showing ``benchmark``'s read-only
    paths); ``model`` (the agent's) sizes the default concurrency."""
    check_execution(execution)
    sandbox = make_sandbox(
        execution.sandbox, limits=parse_limits(execution.sandbox_limits), unsafe=execution.unsafe_no_sandbox
    )
    sandbox = benchmark_sandbox(sandbox, benchmark, execution.sandbox_ro) or sandbox
    return EXECUTORS[execution.executor](default_concurrency(execution.concurrency, model), sandbox)


def build_scorer(
    execution: ExecutionConfig,
    *,
    benchmark: Benchmark,
    model: str | None,
    default_model: str,
    seed: int,
    references: dict[str, Trajectory],
    out_dir: Path | None = None,
    on_progress: Callable[[str, int], Callable[[], None]] | None = None,
    cache: RolloutCache | None = None,
    infra: InfraTally | None = None,
    executor: Executor | None = None,
) -> Scorer:
    """A scorer for agent ``model`` (None: each harness's own, ``default_model`` sizing the
    concurrency). ``executor``: one made already (``make_executor``, e.g. checked before a run
    starts); otherwise made here. Raises when the sandbox cannot work here, before anything runs."""
    return Scorer(
        executor or make_executor(execution, benchmark, model or default_model),
        model=model,
        seed=seed,
        references=references,
        out_dir=out_dir,
        on_progress=on_progress,
        cache=cache,
        infra=infra,
        adapter=benchmark.adapter,
    )
