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
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any

from harnessevolve.core.enums import ExecutorName, Sampling, SandboxName, TrackerName
from harnessevolve.core.option_spec import Option, check_value, declared, option


@dataclass(frozen=True)
class ExecutionConfig:
    """Where and how rollouts run (``run``, ``gate`` and ``report --final`` alike)."""

    executor: ExecutorName = field(
        default=ExecutorName.LOCAL,
        metadata=option(
            "local (async pool in this process), processes (an async pool per CPU, each in a worker "
            "process: many concurrent rollouts on a remote model) or ray (needs the ray extra, "
            "harnessevolve\\[ray])."
        ),
    )
    sandbox: SandboxName = field(
        default=SandboxName.BWRAP,
        metadata=option(
            "Where agent commands run: bwrap (bubblewrap: no network, writes only in the task workspace, "
            "CPU/memory/process/file limits) or docker (needs a running engine).",
            "--sandbox",
        ),
    )
    sandbox_limits: str | None = field(
        default=None,
        metadata=option(
            "Limits of sandboxed commands, e.g. cpu_s=120,memory_mb=2048. Per process: cpu_s, memory_mb, "
            "max_processes, max_file_mb (defaults 60 s, 1024 MiB, 256, 64 MiB); per rollout: "
            "rollout_memory_mb, rollout_processes, workspace_mb, workspace_files (2048 MiB, 256, "
            "1024 MiB, 100000; see docs/threat-model.md).",
            "--sandbox-limits",
        ),
    )
    """``SandboxLimits.parse`` text; None: the sandbox's defaults."""
    unsafe_no_sandbox: bool = field(
        default=False,
        metadata=option(
            "Run agent commands with no isolation at all (only for trusted models on a throwaway machine).",
            "--unsafe-no-sandbox",
        ),
    )
    concurrency: int | None = field(
        default=None,
        metadata=option(
            "Rollouts run at once (default: for local/ models the local pool's size, "
            "HARNESSEVOLVE_LOCAL_POOL, 1 when unset; else 4).",
            min=1,
            max=1024,
        ),
    )
    sandbox_ro: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "A host path every sandboxed command and tool may read, read-only (repeatable; "
            "benchmark.yaml sandbox_ro adds more).",
            "--sandbox-ro",
        ),
    )


@dataclass(frozen=True)
class ScoringConfig:
    """Which agent model scores the harness, with which seed and gates."""

    model: str | None = field(
        default=None,
        metadata=option(
            "Agent model, any litellm name (openai/..., scripted/...); default: the harness's.",
            "--model",
            "-m",
        ),
    )
    seed: int = field(
        default=0,
        metadata=option("Seed for minibatch sampling and model calls.", min=0, max=2**31 - 1),
    )
    gates_file: Path | None = field(
        default=None,
        metadata=option(
            "Gate thresholds YAML, or a shipped one by name: default (one pooled decision over batch, "
            "recent batches and validation), fixed (HarnessEvolve's per-batch rule), paper (it with "
            "accept-on-tie), pooled (the sign test alone). Default: gates/default.yaml.",
            "--gates",
            cli_name="gates",
        ),
    )
    cache: bool = field(
        default=True,
        metadata=option("Reuse rollouts of unchanged (harness, task, model, seed) from earlier runs."),
    )
    """Serve unchanged (harness, task, model, seed) rollouts from DIR/.harnessevolve/cache/."""


@dataclass(frozen=True)
class BudgetConfig:
    """Limits that stop the run cleanly between stages (None: no limit)."""

    max_cost_usd: float | None = field(
        default=None,
        metadata=option("Stop cleanly once model calls cost this much (USD).", min=0, max=1e9),
    )
    max_tokens: int | None = field(
        default=None,
        metadata=option("Stop cleanly once model calls used this many tokens.", min=1, max=10**13),
    )
    max_hours: float | None = field(
        default=None, metadata=option("Stop cleanly after this many hours.", min=0, max=24 * 366)
    )
    price_per_mtok: str | None = field(
        default=None,
        metadata=option(
            "IN,OUT: USD per million input and output tokens for models litellm has no price for "
            "(without it --max-cost-usd refuses such a model: it would cost 0)."
        ),
    )
    max_infra_share: float = field(
        default=0.5,
        metadata=option(
            "Stop the run with exit code 3 when more than this share of its rollouts failed on the "
            "machine (sandbox start, tool server crash, endpoint 5xx after retries, killed by a limit it "
            "did not cause); such rollouts are scored 0 and counted apart from agent failures.",
            min=0.0,
            max=1.0,
        ),
    )
    """(``scoring/infra.py``)."""


@dataclass(frozen=True)
class LoopConfig:
    """The generation loop's shape."""

    generations: int = field(
        default=3, metadata=option("Generations to run.", "--generations", "-n", min=1, max=10_000)
    )
    batch_size: int = field(
        default=40, metadata=option("Train tasks per minibatch.", "--batch-size", min=1, max=100_000)
    )
    sampling: Sampling = field(
        default=Sampling.UNIFORM,
        metadata=option("Minibatch sampling: uniform, or regret (prefer tasks solvable but not yet solved)."),
    )
    """(``pipeline/policies.py`` ``BATCH_SAMPLERS``; regret reads the benchmark's regret.json)."""
    candidates: int = field(
        default=1,
        metadata=option(
            "Candidates proposed and judged at once per generation.", "--candidates", "-k", min=1, max=64
        ),
    )
    """K: the best that passes is kept."""
    max_revisions: int = field(
        default=3,
        metadata=option(
            "Times a quality-gate rejection goes back to the proposer with its reason.", min=0, max=20
        ),
    )
    """T_rev."""
    epoch_patience: int = 10
    """Straight generations without an accepted edit that end an epoch (then the best snapshot on
    validation becomes current; the run's end also ends an epoch)."""


@dataclass(frozen=True)
class OptimizeConfig:
    """Who proposes the edits."""

    proposers: tuple[str, ...] = field(
        default=("auto",),
        metadata=option(
            "Proposers tried in order: llm, llm-rule, llm-patch, agent, ablate, behaviour, tools, loop, "
            "memory, world_model, demo, rules. auto: llm (with --optimizer-model), then ablate, behaviour, "
            "tools, loop, memory, world_model, demo, rules. agent: the agent proposer, a coding "
            "agent (--optimizer-agent) that edits a copy of the harness in the sandbox; its diff is the "
            "candidate. A proposer whose candidates gates refused is asked after those with fewer "
            "refusals since their last accepted one.",
            "--proposer",
            cli_name="proposer",
        ),
    )
    optimizer_model: str | None = field(
        default=None,
        metadata=option(
            "Model for the llm, llm-rule and agent proposers (a litellm name; agent: default the "
            "optimizer folder's model).",
            "--optimizer-model",
        ),
    )
    optimizer_agent: str | None = field(
        default=None,
        metadata=option(
            "With --proposer agent: the optimizer folder, a harness whose agent edits ./harness "
            "(default: the built-in harnesses/optimizer-agent, mini-swe-agent).",
            "--optimizer-agent",
        ),
    )
    max_proposer_cost_usd: float | None = field(
        default=None,
        metadata=option(
            "The agent proposer's own budget: its model calls may cost this much over the run (USD); "
            "past it its proposals are refused and the run goes on.",
            min=0,
            max=1e9,
        ),
    )
    """Counted within --max-cost-usd."""
    max_proposer_tokens: int | None = field(
        default=None,
        metadata=option("The agent proposer's own budget in tokens over the run.", min=1, max=10**13),
    )
    """Counted within --max-tokens."""


@dataclass(frozen=True)
class FloorConfig:
    """The null-agent floor checked before a run (``judging/floor.py``)."""

    floor_sample: int = field(
        default=8,
        metadata=option(
            "Tasks the null-agent floor checks before the run (do-nothing, empty answer, echoed "
            "instruction; 0: skip). `validate SUITE --floor` checks every task.",
            min=0,
            max=100_000,
        ),
    )
    max_floor_share: float = field(
        default=0.25,
        metadata=option(
            "Refuse the run (exit 2) when the null agents pass more than this share of the sample "
            "(a sample of fewer than 4 tasks only warns).",
            min=0.0,
            max=1.0,
        ),
    )
    accept_floor: bool = field(
        default=False,
        metadata=option(
            "The benchmark means its high floor (e.g. gold that leaves the state unchanged): "
            "record the floor and run anyway.",
            "--accept-floor",
        ),
    )


@dataclass(frozen=True)
class EvolveConfig:
    """Environment evolution (``pipeline/evolve_env.py``)."""

    evolve_environments: bool = field(
        default=False,
        metadata=option(
            "Once the harness passes a task family's train tasks, make harder variants (chained "
            "steps; one more bug for synthesized SWE tasks), keep those whose gold passes and the harness "
            "fails, and draw a quarter of later minibatches from them. Validation and test never change.",
            "--evolve-environments",
        ),
    )
    evolve_threshold: float = field(
        default=0.75,
        metadata=option(
            "With --evolve-environments: the pass rate of a task family (current harness, at least "
            "2 of its train tasks run) at which its tasks get harder variants.",
            "--evolve-threshold",
            min=0.0,
            max=1.0,
        ),
    )


@dataclass(frozen=True)
class TrainingConfig:
    """The optional policy trainer stage."""

    train_every: int = field(
        default=0,
        metadata=option(
            "Fine-tune the agent model every N generations on the run's trajectories (0: never; "
            "local/ models; needs the train extra). The checkpoint becomes the agent model.",
            min=0,
            max=10_000,
        ),
    )
    train_base_model: str | None = field(
        default=None,
        metadata=option("Weights to fine-tune when the agent model has none here (a checkpoint folder)."),
    )


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

    harness_dir: Path = field(
        metadata=option("The harness directory.", "--harness", "-H", cli_name="harness")
    )
    benchmark: str = field(
        metadata=option(
            "A built-in benchmark's name (e.g. shell-onecall), a folder, harbor:PATH, nl2bash[:N], or a "
            "fixed slice of one: subset:validation=N,test=N@SPEC.",
            "--benchmark",
            "-b",
        )
    )
    adapters: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "module:attr of a benchmark adapter to load --benchmark with, imported from the current "
            "directory without installing it (repeatable).",
            "--adapter",
            cli_name="adapter",
        ),
    )
    allow_dirty: bool = field(
        default=False, metadata=option("Snapshot uncommitted harness changes in a commit first.")
    )
    track: TrackerName | None = field(
        default=None,
        metadata=option("Mirror the run into a tracker: mlflow (needs the tracking extra; local store)."),
    )
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)
    optimize: OptimizeConfig = field(default_factory=OptimizeConfig)
    floor: FloorConfig = field(default_factory=FloorConfig)
    evolve: EvolveConfig = field(default_factory=EvolveConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)

    @classmethod
    def from_flat(cls, values: Mapping[str, Any], *, strict: bool = True, where: str = "") -> RunConfig:
        """The configuration from flat keys (the ``run`` command's parameters, or a recorded
        ``run_started.options``). Values are converted to their fields' types (paths, tuples,
        enums). ``strict``: a key no field records raises ``TypeError`` naming it; otherwise it
        is ignored (an option a newer version recorded). A value outside its option's bounds raises
        ``OptionValueError`` (exit 2) naming the option, and ``where`` (the file) when given."""
        known = set(flat_keys())
        unknown = sorted(set(values) - known)
        if unknown and strict:
            raise TypeError(f"not a run option: {', '.join(unknown)}")
        sections = {name: _build(record, values, where) for name, record in SECTIONS.items()}
        top = {f.name: values[f.name] for f in fields(cls) if f.name not in SECTIONS and f.name in values}
        for f in fields(cls):
            if f.name in top:
                top[f.name] = _convert(_hint(cls, f.name), top[f.name])
                _check(f, top[f.name], where)
        return cls(**top, **sections)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], *, where: str = "") -> RunConfig:
        """A recorded ``run_started.options`` (any version: missing keys take defaults, unknown ones
        are ignored; a value out of its option's bounds is refused, naming ``where``)."""
        values = {"harness_dir": ".", "benchmark": "", **{k: v for k, v in doc.items() if v is not None}}
        return cls.from_flat(values, strict=False, where=where)

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


def _build(record: type, values: Mapping[str, Any], where: str = "") -> Any:
    hints = typing.get_type_hints(record)
    chosen = {f.name: _convert(hints[f.name], values[f.name]) for f in fields(record) if f.name in values}
    for f in fields(record):
        if f.name in chosen:
            _check(f, chosen[f.name], where)
    return record(**chosen)


def _check(f: Field[Any], value: Any, where: str) -> None:
    spec = declared(f)
    if spec is not None:
        check_value(f.name, value, spec, where=where)


@dataclass(frozen=True)
class Declared:
    """One run option as the command line offers it: its flat key, section (None: top level), type
    and default, and its declaration (flags, help, bounds)."""

    key: str
    section: str | None
    hint: Any
    default: Any
    option: Option

    @property
    def cli_name(self) -> str:
        return self.option.cli_name or self.key


def declarations() -> list[Declared]:
    """Every run option declared on a field (top level first, then each section's, in order)."""
    out: list[Declared] = []
    for section, record in [(None, RunConfig), *SECTIONS.items()]:
        hints = typing.get_type_hints(record)
        for f in fields(record):
            spec = declared(f)
            if spec is None:
                continue
            default = f.default if f.default is not MISSING else None
            out.append(Declared(f.name, section, hints[f.name], default, spec))
    return out


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
