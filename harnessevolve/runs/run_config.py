"""A run's configuration, composed by concern and typed: built once from the ``run`` command's
options, recorded once in ``run_started.options``, read back by ``--resume``, ``report --final``,
``status`` and ``gate``.

On disk the options stay one flat object (``{"generations": 3, "sandbox": "bwrap", ...}``), the
shape every run has recorded since options were recorded: each section's fields carry the flat
key they are recorded under, so older ledgers read unchanged (a key a run did not record takes
its default, a key this version does not know is ignored) and no ledger migration is needed.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harnessevolve.core.enums import ExecutorName, Sampling, SandboxName, TrackerName


@dataclass(frozen=True)
class ExecutionConfig:
    """Where and how rollouts run (``run``, ``gate`` and ``report --final`` alike)."""

    executor: ExecutorName = ExecutorName.LOCAL
    """``local`` (an async pool in this process) or ``ray``."""
    sandbox: SandboxName = SandboxName.BWRAP
    """Where agent commands run: ``bwrap``, ``docker``, or ``none`` (needs ``unsafe_no_sandbox``)."""
    sandbox_limits: str | None = None
    """Per-process limits for sandboxed commands (``SandboxLimits.parse`` text); None: defaults."""
    unsafe_no_sandbox: bool = False
    concurrency: int | None = None
    """Rollouts at once; ``None``: 1 for the embedded model, 4 otherwise."""
    sandbox_ro: tuple[str, ...] = ()
    """More host paths the sandbox shows read-only (``--sandbox-ro``)."""


@dataclass(frozen=True)
class ScoringConfig:
    """Which agent model scores the harness, with which seed and gates."""

    model: str | None = None
    """Agent model; ``None`` uses the harness's ``model``."""
    seed: int = 0
    gates_file: Path | None = None
    """The gate configuration (YAML); None: the built-in defaults."""
    cache: bool = True
    """Serve unchanged (harness, task, model, seed) rollouts from DIR/.harnessevolve/cache/."""


@dataclass(frozen=True)
class BudgetConfig:
    """Limits that stop the run cleanly between stages (None: no limit)."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None
    max_hours: float | None = None
    price_per_mtok: str | None = None
    """``IN,OUT`` USD per million tokens for models litellm has no price for (``--price-per-mtok``)."""
    max_infra_share: float = 0.5
    """Stop the run (exit 3) when more than this share of its rollouts failed on the machine
    (sandbox, tool server, endpoint 5xx, executor; ``pipeline/rollouts/infra.py``)."""


@dataclass(frozen=True)
class LoopConfig:
    """The generation loop's shape."""

    generations: int = 3
    batch_size: int = 40
    sampling: Sampling = Sampling.UNIFORM
    """Minibatch sampling (``pipeline/policies.py`` ``BATCH_SAMPLERS``): ``uniform``, or ``regret``
    (prefer tasks with a high pass-rate gap, from the benchmark's regret.json)."""
    candidates: int = 1
    """K: candidates proposed and judged concurrently per generation; the best that passes is kept."""
    max_revisions: int = 3
    """T_rev: times a quality-gate rejection goes back to the proposer with its reason."""
    epoch_patience: int = 10
    """Straight generations without an accepted edit that end an epoch (then the best snapshot on
    validation becomes current; the run's end also ends an epoch)."""


@dataclass(frozen=True)
class OptimizeConfig:
    """Who proposes the edits."""

    proposers: tuple[str, ...] = ("auto",)
    """Proposer names tried in order; ``auto``: ``llm`` (with an optimizer model), ``demo``, ``rules``."""
    optimizer_model: str | None = None
    """The proposer's model (any litellm name), separate from the agent's."""
    optimizer_agent: str | None = None
    """``--proposer agent``: the optimizer folder (a harness); None: the built-in optimizer-agent."""
    max_proposer_cost_usd: float | None = None
    """What the optimizer agent's model calls may cost over the run (counted within --max-cost-usd)."""
    max_proposer_tokens: int | None = None
    """Tokens the optimizer agent's model calls may use over the run (counted within --max-tokens)."""


@dataclass(frozen=True)
class FloorConfig:
    """The null-agent floor checked before a run (``pipeline/judging/floor.py``)."""

    floor_sample: int = 8
    """Tasks the null-agent floor checks at the run's start (0: none)."""
    max_floor_share: float = 0.25
    """Refuse the run (exit 2) when do-nothing or trivial agents pass more than this share of them."""
    accept_floor: bool = False
    """The benchmark means a high floor (e.g. gold that leaves the state unchanged): run anyway."""


@dataclass(frozen=True)
class EvolveConfig:
    """Environment evolution (``pipeline/evolve_env.py``)."""

    evolve_environments: bool = False
    """Make harder train tasks once the current ones are mastered."""
    evolve_threshold: float = 0.75
    """The family pass rate (current harness) at which harder variants are made."""


@dataclass(frozen=True)
class TrainingConfig:
    """The optional policy trainer stage."""

    train_every: int = 0
    """Fine-tune the agent model every N generations on what the run collected (0: never)."""
    train_base_model: str | None = None
    """The weights to train when the agent model has none here (a checkpoint folder or alias)."""


SECTIONS = {
    "execution": ExecutionConfig,
    "scoring": ScoringConfig,
    "budget": BudgetConfig,
    "loop": LoopConfig,
    "optimize": OptimizeConfig,
    "floor": FloorConfig,
    "evolve": EvolveConfig,
    "training": TrainingConfig,
}
"""Section name -> its record; every field of every section is recorded under its own name."""


@dataclass(frozen=True)
class RunConfig:
    """Everything a run was asked to do. Top-level fields are what no section owns."""

    harness_dir: Path
    benchmark: str
    """A built-in benchmark's name, a folder, ``harbor:PATH``, ``nl2bash[:N]`` or ``subset:LIMITS@SPEC``."""
    adapters: tuple[str, ...] = ()
    """``module:attr`` adapters to load the benchmark with (``--adapter``)."""
    allow_dirty: bool = False
    track: TrackerName | None = None
    """Mirror the ledger into a tracker: ``mlflow`` (needs harnessevolve[tracking])."""
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)
    optimize: OptimizeConfig = field(default_factory=OptimizeConfig)
    floor: FloorConfig = field(default_factory=FloorConfig)
    evolve: EvolveConfig = field(default_factory=EvolveConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)

    @classmethod
    def from_flat(cls, values: Mapping[str, Any], *, strict: bool = True) -> RunConfig:
        """The configuration from flat keys (the ``run`` command's parameters, or a recorded
        ``run_started.options``). Values are converted to their fields' types (paths, tuples,
        enums). ``strict``: a key no field records raises ``TypeError`` naming it; otherwise it
        is ignored (an option a newer version recorded)."""
        known = set(flat_keys())
        unknown = sorted(set(values) - known)
        if unknown and strict:
            raise TypeError(f"not a run option: {', '.join(unknown)}")
        sections = {name: _build(record, values) for name, record in SECTIONS.items()}
        top = {f.name: values[f.name] for f in fields(cls) if f.name not in SECTIONS and f.name in values}
        for f in fields(cls):
            if f.name in top:
                top[f.name] = _convert(_hint(cls, f.name), top[f.name])
        return cls(**top, **sections)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RunConfig:
        """A recorded ``run_started.options`` (any version: missing keys take defaults, unknown ones
        are ignored)."""
        values = {"harness_dir": ".", "benchmark": "", **{k: v for k, v in doc.items() if v is not None}}
        return cls.from_flat(values, strict=False)

    def to_json(self) -> dict[str, Any]:
        """The flat object recorded in ``run_started.options`` (JSON types only)."""
        return {k: _plain(v) for k, v in self.flat().items()}

    def flat(self) -> dict[str, Any]:
        """Every field by its flat key (typed values)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in SECTIONS}
        for name in SECTIONS:
            out.update({f.name: getattr(getattr(self, name), f.name) for f in fields(getattr(self, name))})
        return out

    def replace(self, **flat: Any) -> RunConfig:
        """A copy with some flat keys changed (``harness_dir=...``, ``generations=...``)."""
        return RunConfig.from_flat({**self.flat(), **flat})


def flat_keys() -> list[str]:
    """Every key a run's options are recorded under (top level first, then each section's)."""
    top = [f.name for f in fields(RunConfig) if f.name not in SECTIONS]
    return top + [f.name for record in SECTIONS.values() for f in fields(record)]


def _hint(record: type, name: str) -> Any:
    return typing.get_type_hints(record)[name]


def _build(record: type, values: Mapping[str, Any]) -> Any:
    hints = typing.get_type_hints(record)
    chosen = {f.name: _convert(hints[f.name], values[f.name]) for f in fields(record) if f.name in values}
    return record(**chosen)


def _convert(hint: Any, value: Any) -> Any:
    """``value`` as ``hint`` says: Optional, Path, tuple[str, ...] and enums (others as given)."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _convert(inner[0], value) if len(inner) == 1 else value
    if hint is Path:
        return Path(value)
    if origin is tuple:
        return tuple(value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def section_of(key: str) -> str | None:
    """The section a flat key belongs to (None: top level)."""
    return next((name for name, record in SECTIONS.items() if key in {f.name for f in fields(record)}), None)
