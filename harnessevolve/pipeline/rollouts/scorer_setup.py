"""One scorer set-up for ``run``, ``gate`` and ``report --final``: the executor, its sandbox (with
the run's limits) and its concurrency, from the same options each command takes.

``report --final`` builds it from the run's own recorded options (``run_started.options``), so the
sealed test split is scored in the sandbox, with the limits, executor and concurrency the run used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.tasks import Benchmark
from harnessevolve.execute.executor import EXECUTORS, Executor
from harnessevolve.execute.tool_server import benchmark_sandbox
from harnessevolve.models.local_pool import capped_by_cores, requested_size
from harnessevolve.pipeline.rollouts.rollout_cache import RolloutCache
from harnessevolve.pipeline.rollouts.scoring import Scorer
from harnessevolve.runs.run_config import ExecutionConfig
from harnessevolve.sandbox.base import SandboxLimits, make_sandbox


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


@dataclass(frozen=True)
class ScorerSetup:
    """Where and how rollouts run: a run's ``RunConfig.execution`` (``from_config``)."""

    executor: str = "local"
    sandbox: str = "bwrap"
    sandbox_limits: str | None = None
    """``SandboxLimits.parse`` text; None: the sandbox's defaults."""
    unsafe_no_sandbox: bool = False
    concurrency: int | None = None
    sandbox_ro: tuple[str, ...] = ()
    """More host paths the sandbox shows read-only (``--sandbox-ro``)."""

    @classmethod
    def from_config(cls, execution: ExecutionConfig) -> ScorerSetup:
        """The set-up a run's configuration names (``RunConfig.execution``)."""
        return cls(
            executor=execution.executor,
            sandbox=execution.sandbox,
            sandbox_limits=execution.sandbox_limits,
            unsafe_no_sandbox=execution.unsafe_no_sandbox,
            concurrency=execution.concurrency,
            sandbox_ro=execution.sandbox_ro,
        )

    def check(self) -> None:
        if self.executor not in EXECUTORS:
            raise HarnessEvolveError(
                f"unknown executor {self.executor!r}",
                field="--executor",
                hint=f"choose from: {', '.join(EXECUTORS)}",
            )
        parse_limits(self.sandbox_limits)

    def make_executor(self, benchmark: Benchmark, model: str) -> Executor:
        """The executor, with its sandbox checked to work here (and showing ``benchmark``'s
        read-only paths); ``model`` (the agent's) sizes the default concurrency."""
        self.check()
        sandbox = make_sandbox(
            self.sandbox, limits=parse_limits(self.sandbox_limits), unsafe=self.unsafe_no_sandbox
        )
        sandbox = benchmark_sandbox(sandbox, benchmark, self.sandbox_ro) or sandbox
        return EXECUTORS[self.executor](default_concurrency(self.concurrency, model), sandbox)

    def build(
        self,
        *,
        benchmark: Benchmark,
        model: str | None,
        default_model: str,
        seed: int,
        references: dict[str, Trajectory],
        out_dir: Path | None = None,
        on_progress: Callable[[str, int], Callable[[], None]] | None = None,
        cache: RolloutCache | None = None,
    ) -> Scorer:
        """A scorer for agent ``model`` (None: each harness's own, ``default_model`` sizing the
        concurrency). Raises when the sandbox cannot work here, before anything runs."""
        return Scorer(
            self.make_executor(benchmark, model or default_model),
            model=model,
            seed=seed,
            references=references,
            out_dir=out_dir,
            on_progress=on_progress,
            cache=cache,
            adapter=benchmark.adapter,
        )
