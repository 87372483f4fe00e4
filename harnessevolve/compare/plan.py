"""A comparison plan (YAML, ``version: 1``), read with the bounded YAML reader and checked field by
field before any cell starts: a bad field is one ``PlanError`` naming the plan file and the field.

    version: 1
    model: scripted/policy:learner        # the agent model of every arm (a litellm name)
    benchmark: shell-basics               # a spec as `run -b` takes it; it needs a test split
    harness: {template: shell-agent}      # the seed harness: a folder, or a template
    seeds: [0, 1, 2]
    execution: {sandbox: bwrap}           # optional: how every arm's rollouts run and are scored
    arms:
      - {kind: seed}                                  # the seed harness as it is
      - {name: evolve, kind: evolve, options: {generations: 2, batch_size: 8}}
      - {kind: best-of-k, matched_to: evolve}         # k = round(evolve's rollouts / test tasks)
      - {name: hand-edit, kind: harness, path: ../my-harness}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessevolve.compare.arm_spec import ARM_KINDS, Arm, check_arm
from harnessevolve.compare.options import PlanError, PlanField, checked_options
from harnessevolve.core import paths
from harnessevolve.core.enums import SandboxName
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.tasks import Benchmark
from harnessevolve.runs.run_config import ExecutionConfig

PLAN_VERSION = 1
"""The plan format's version; a newer one is refused."""
FIELDS = ("version", "model", "benchmark", "harness", "seeds", "execution", "arms")
DEFAULT_TEMPLATE = "shell-agent"
MAX_SEEDS = 1000
__all__ = ["ARM_KINDS", "Arm", "Plan", "PlanError", "SeedHarness", "load_plan"]


@dataclass(frozen=True)
class SeedHarness:
    """The harness every arm starts from: a folder (``path``), perhaps a shipped template's."""

    path: Path
    given: str
    """As the plan wrote it: ``template NAME`` or the path."""
    template: str | None = None


@dataclass(frozen=True)
class Plan:
    file: Path
    text: str
    """The plan file as read (kept beside the cells, for the record)."""
    model: str
    benchmark: str
    """The spec cells load (a folder the plan named relative to itself made absolute)."""
    benchmark_given: str
    suite: Benchmark = field(compare=False, repr=False)
    harness: SeedHarness = field(default_factory=lambda: SeedHarness(Path("."), "."))
    seeds: tuple[int, ...] = ()
    arms: tuple[Arm, ...] = ()
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)

    @property
    def test_tasks(self) -> int:
        return len(self.suite.split("test"))


def load_plan(path: Path) -> Plan:
    """Read and check a plan; everything it names (model, benchmark, harness folders, gates files,
    proposers) is checked here, so a bad plan starts no cell."""
    from harnessevolve.core.documents import MAX_YAML_BYTES, load_yaml_text, read_bounded

    text = read_bounded(path, MAX_YAML_BYTES, error=PlanError)
    doc = load_yaml_text(text, file=str(path), error=PlanError)
    root = PlanField(path, "")
    if not isinstance(doc, dict):
        raise PlanError("a plan is a YAML mapping (version, model, benchmark, seeds, arms)", file=str(path))
    base = path.resolve().parent
    _check_version(doc, root)
    unknown = [str(k) for k in doc if k not in FIELDS]
    if unknown:
        raise _at(root, unknown[0]).error("unknown field", f"a plan's fields: {', '.join(FIELDS)}")
    for required in ("model", "benchmark", "seeds", "arms"):
        if required not in doc:
            raise _at(root, required).error(
                "missing", f"a plan needs {', '.join(('model', 'benchmark', 'seeds', 'arms'))}"
            )
    model = _model(doc["model"], _at(root, "model"))
    benchmark, suite = _benchmark(doc["benchmark"], _at(root, "benchmark"), base)
    harness = _harness(doc.get("harness"), _at(root, "harness"), base)
    seeds = _seeds(doc["seeds"], _at(root, "seeds"))
    execution = _execution(doc.get("execution"), _at(root, "execution"), base)
    arms = _arms(doc["arms"], _at(root, "arms"), base)
    return Plan(
        file=path,
        text=text,
        model=model,
        benchmark=benchmark,
        benchmark_given=str(doc["benchmark"]),
        suite=suite,
        harness=harness,
        seeds=seeds,
        arms=arms,
        execution=execution,
    )


def _at(root: PlanField, name: str) -> PlanField:
    return PlanField(root.file, name)


def _check_version(doc: dict[str, Any], root: PlanField) -> None:
    where = _at(root, "version")
    version = doc.get("version")
    if version is None:
        raise where.error("missing", f"start the plan with `version: {PLAN_VERSION}`")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise where.error(f"must be a whole number, not {version!r}", f"write `version: {PLAN_VERSION}`")
    if version > PLAN_VERSION:
        raise where.error(
            f"version {version} is newer than this harnessevolve reads ({PLAN_VERSION})",
            "upgrade harnessevolve, or write the plan for this version",
        )


def _model(value: Any, where: PlanField) -> str:
    from harnessevolve.models.preflight import check_model_name

    if not isinstance(value, str):
        raise where.error(
            f"must be a model name, not {value!r}", "e.g. local/qwen2.5-coder-0.5b or openai/gpt-4o-mini"
        )
    try:
        check_model_name(value, option="model")
    except HarnessEvolveError as exc:
        raise where.error(exc.message, exc.hint) from None
    return value


def _benchmark(value: Any, where: PlanField, base: Path) -> tuple[str, Benchmark]:
    from harnessevolve.adapters import load_benchmark_spec

    if not isinstance(value, str) or not value.strip():
        raise where.error(
            f"must be a benchmark spec, not {value!r}", "e.g. shell-basics, nl2bash:50 or a folder"
        )
    beside = base / value
    spec = str(beside.resolve()) if (beside / "benchmark.yaml").is_file() else value
    try:
        suite = load_benchmark_spec(spec)
    except HarnessEvolveError as exc:
        message = exc.one_line() if exc.file else exc.message
        raise where.error(message, exc.hint) from None
    if not suite.split("test"):
        raise where.error(
            f"benchmark {suite.name} has no test split",
            "compare scores every arm on the test split: give tasks `split: test`, "
            "or slice one (subset:validation=N,test=N@SPEC)",
        )
    return spec, suite


def _harness(value: Any, where: PlanField, base: Path) -> SeedHarness:
    from harnessevolve.harness.load import load_harness

    if value is None:
        value = {"template": DEFAULT_TEMPLATE}
    if isinstance(value, dict):
        if set(value) != {"template"}:
            extra = sorted(set(value) - {"template"})
            raise where.child(str(extra[0]) if extra else "template").error(
                "a seed harness is a folder, or {template: NAME}", "e.g. harness: {template: shell-agent}"
            )
        name = value["template"]
        root = paths.builtin_dir("harnesses")
        templates = (
            sorted(p.name for p in root.iterdir() if (p / "harness.yaml").is_file()) if root.is_dir() else []
        )
        if not isinstance(name, str) or name not in templates:
            raise where.child("template").error(
                f"unknown template {name!r}", f"templates: {', '.join(templates)}"
            )
        return SeedHarness(root / name, f"template {name}", template=name)
    if not isinstance(value, str) or not value.strip():
        raise where.error(
            f"must be a harness folder or {{template: NAME}}, not {value!r}", "e.g. harness: ./my-harness"
        )
    folder = (base / value).resolve()
    if not (folder / "harness.yaml").is_file():
        raise where.error(
            f"no harness.yaml in {folder}", "name a harness folder (`harnessevolve init DIR` makes one)"
        )
    try:
        load_harness(folder)
    except HarnessEvolveError as exc:
        raise where.error(exc.one_line(), exc.hint) from None
    return SeedHarness(folder, value)


def _seeds(value: Any, where: PlanField) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise where.error(f"must be a non-empty list of seeds, not {value!r}", "e.g. seeds: [0, 1, 2]")
    if len(value) > MAX_SEEDS:
        raise where.error(f"{len(value)} seeds; at most {MAX_SEEDS}", "run fewer seeds per plan")
    for i, seed in enumerate(value):
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
            raise where.child(i).error(
                f"a seed is a whole number from 0 to 2^31-1, not {seed!r}", "e.g. seeds: [0, 1, 2]"
            )
    if len(set(value)) != len(value):
        twice = next(s for s in value if value.count(s) > 1)
        raise where.error(f"seed {twice} is listed twice", "list each seed once")
    return tuple(value)


def _execution(value: Any, where: PlanField, base: Path) -> ExecutionConfig:
    from harnessevolve.scoring.build import check_execution

    chosen = checked_options(value, where, base=base, section="execution", reserved={})
    if chosen.get("unsafe_no_sandbox") and "sandbox" not in chosen:
        chosen["sandbox"] = SandboxName.NONE
    if chosen.get("sandbox") is SandboxName.NONE and not chosen.get("unsafe_no_sandbox"):
        raise where.child("sandbox").error(
            "sandbox none runs agent commands unisolated", "add `unsafe_no_sandbox: true` if you mean it"
        )
    if "sandbox_ro" in chosen:
        chosen["sandbox_ro"] = tuple(str((base / p).resolve()) for p in chosen["sandbox_ro"])
    execution = ExecutionConfig(**chosen)
    try:
        check_execution(execution)
    except HarnessEvolveError as exc:
        raise where.child(str(exc.field or "").lstrip("-").replace("-", "_") or "executor").error(
            exc.message, exc.hint
        ) from None
    return execution


NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


def _arms(value: Any, where: PlanField, base: Path) -> tuple[Arm, ...]:
    if not isinstance(value, list) or not value:
        raise where.error(
            f"must be a non-empty list of arms, not {value!r}", "e.g. arms: [{kind: seed}, {kind: evolve}]"
        )
    arms: list[Arm] = []
    for i, doc in enumerate(value):
        arm = check_arm(doc, where.child(i), base)
        if not NAME.match(arm.name):
            raise (
                where.child(i)
                .child("name")
                .error(
                    f"{arm.name!r} is not an arm name",
                    "lower-case letters, digits, '.', '_' and '-' (it names a folder)",
                )
            )
        if any(a.name == arm.name for a in arms):
            raise (
                where.child(i)
                .child("name")
                .error(f"two arms are named {arm.name!r}", "give each arm its own name")
            )
        arms.append(arm)
    evolve = {a.name for a in arms if a.kind == "evolve"}
    for i, arm in enumerate(arms):
        if arm.matched_to is not None and arm.matched_to not in evolve:
            raise (
                where.child(i)
                .child("matched_to")
                .error(
                    f"{arm.matched_to!r} names no evolve arm",
                    f"evolve arms: {', '.join(sorted(evolve))}"
                    if evolve
                    else "add an evolve arm, or give k by hand",
                )
            )
    return tuple(arms)
