"""One arm of a plan, checked field by field: its kind, name and the fields its kind takes.

Kinds: ``seed`` (the seed harness as it is), ``evolve`` (a ``run`` with ``options``: any run option
but those the plan sets for every arm), ``best-of-k`` (the seed harness sampled k times per test
task; k matched to an evolve arm's rollouts with ``matched_to``, or given by hand with ``k``) and
``harness`` (a fixed harness folder, optionally at a git ``revision``) and ``gepa`` (GEPA on the
seed harness's texts with a ``reflection_model``, its metric calls matched to an evolve arm's
rollouts with ``matched_to`` or given as ``budget``; needs the ``gepa`` extra).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.compare.options import PlanField, checked_options, run_options
from harnessevolve.core.errors import HarnessEvolveError

ARM_KINDS = ("seed", "evolve", "best-of-k", "harness", "gepa")
KIND_FIELDS = {
    "seed": ("name", "kind"),
    "evolve": ("name", "kind", "options", "start"),
    "best-of-k": ("name", "kind", "matched_to", "k", "temperature"),
    "harness": ("name", "kind", "path", "revision"),
    "gepa": ("name", "kind", "reflection_model", "matched_to", "budget", "max_tokens"),
}
MAX_BUDGET = 1_000_000
"""Metric calls (rollouts) a gepa arm may be given."""
MAX_REFLECTION_TOKENS = 32_768
MAX_K = 1000
"""Samples per task a best-of-k arm may take (a larger k is a typo, not a control)."""
MAX_TEMPERATURE = 5.0


@dataclass(frozen=True)
class Arm:
    """One arm: ``name`` (its cells' folder) and ``kind``, with the fields its kind takes."""

    name: str
    kind: str
    options: tuple[tuple[str, Any], ...] = ()
    """evolve: run options by flat key, typed (``RunConfig.from_flat`` takes them)."""
    given: tuple[tuple[str, Any], ...] = ()
    """The arm's fields as the plan wrote them (paths excluded): what defines the arm in its
    cells' result files, so cells of another arm of the same name are told apart."""
    matched_to: str | None = None
    k: int | None = None
    budget: int | None = None
    """gepa: GEPA's metric calls when not matched to an evolve arm."""
    reflection_model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    path: Path | None = None
    revision: str | None = None

    def config(self) -> dict[str, Any]:
        """The arm as JSON (its result files' ``arm.config``)."""
        return {"kind": self.kind, **dict(self.given)}

    @property
    def run_options(self) -> dict[str, Any]:
        return dict(self.options)


def check_arm(doc: Any, where: PlanField, base: Path) -> Arm:
    if not isinstance(doc, dict):
        raise where.error(f"an arm is a mapping, not {doc!r}", "e.g. {name: evolve, kind: evolve}")
    kind = doc.get("kind")
    if kind not in ARM_KINDS:
        raise where.child("kind").error(
            f"unknown arm kind {kind!r}" if kind is not None else "missing", f"kinds: {', '.join(ARM_KINDS)}"
        )
    allowed = KIND_FIELDS[kind]
    unknown = [str(k) for k in doc if k not in allowed]
    if unknown:
        raise where.child(unknown[0]).error(
            f"unknown field of a {kind} arm", f"a {kind} arm's fields: {', '.join(allowed)}"
        )
    name = doc.get("name", kind)
    if not isinstance(name, str):
        raise where.child("name").error(f"must be a string, not {name!r}", "e.g. name: evolve-2gen")
    if kind == "evolve":
        return _evolve(name, doc, where, base)
    if kind == "best-of-k":
        return _best_of_k(name, doc, where)
    if kind == "harness":
        return _fixed(name, doc, where, base)
    if kind == "gepa":
        return _gepa(name, doc, where)
    return Arm(name, kind)


def _evolve(name: str, doc: dict[str, Any], where: PlanField, base: Path) -> Arm:
    at = where.child("options")
    options = checked_options(doc.get("options"), at, base=base)
    _check_evolve(options, at)
    spelled = run_options()
    raw = {spelled[str(k)].key: v for k, v in (doc.get("options") or {}).items()}
    given = {key: raw[key] if isinstance(value, Path) else _plain(value) for key, value in options.items()}
    defined: dict[str, Any] = {"options": dict(sorted(given.items()))}
    start = None
    if doc.get("start") is not None:
        start, defined["start"] = _start_harness(doc["start"], where.child("start"), base)
    return Arm(name, "evolve", tuple(sorted(options.items())), tuple(sorted(defined.items())), path=start)


def _start_harness(value: Any, where: PlanField, base: Path) -> tuple[Path, str]:
    """An evolve arm's ``start``: the harness folder its run starts from instead of the plan's seed
    harness (the seed with a runtime component on, last week's production harness); the arm is
    defined by that harness's content hash, so a changed folder is another arm."""
    from harnessevolve.harness.load import load_harness

    if not isinstance(value, str) or not value.strip():
        raise where.error(f"must be a harness folder, not {value!r}", "e.g. start: harnesses/with-memory")
    folder = (base / value).resolve()
    if not (folder / "harness.yaml").is_file():
        raise where.error(f"no harness.yaml in {folder}", "name a harness folder")
    try:
        return folder, load_harness(folder).content_hash()
    except HarnessEvolveError as exc:
        raise where.error(exc.one_line(), exc.hint) from None


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    return list(value) if isinstance(value, tuple) else value


def _check_evolve(options: dict[str, Any], where: PlanField) -> None:
    """What the run would refuse at its start, refused now: proposers, optimizer model, gates."""
    from harnessevolve.gate.config import load_gate_config
    from harnessevolve.models.preflight import check_model_name
    from harnessevolve.optimize.registry import MODEL_PROPOSERS, PROPOSERS

    model = options.get("optimizer_model")
    if model is not None:
        try:
            check_model_name(model, option="optimizer_model")
        except HarnessEvolveError as exc:
            raise where.child("optimizer_model").error(exc.message, exc.hint) from None
    known = {"auto", "agent", *PROPOSERS, *MODEL_PROPOSERS}
    for proposer in options.get("proposers", ()):
        if proposer not in known:
            raise where.child("proposers").error(
                f"unknown proposer {proposer!r}", f"proposers: {', '.join(sorted(known))}"
            )
        if proposer in MODEL_PROPOSERS and model is None:
            raise where.child("proposers").error(
                f"the {proposer} proposer needs a model", "add optimizer_model: NAME to the arm's options"
            )
    try:
        load_gate_config(options.get("gates_file"))
    except HarnessEvolveError as exc:
        raise where.child("gates").error(exc.one_line(), exc.hint) from None


def _best_of_k(name: str, doc: dict[str, Any], where: PlanField) -> Arm:
    matched_to, k, temperature = doc.get("matched_to"), doc.get("k"), doc.get("temperature")
    if (matched_to is None) == (k is None):
        raise where.child("matched_to").error(
            "a best-of-k arm needs matched_to (an evolve arm) or k, one of them",
            "matched_to: evolve spends what that arm spent; k: N samples per test task, not matched",
        )
    if matched_to is not None and not isinstance(matched_to, str):
        raise where.child("matched_to").error(
            f"must name an evolve arm, not {matched_to!r}", "e.g. matched_to: evolve"
        )
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K):
        raise where.child("k").error(
            f"k is the samples per test task, from 1 to {MAX_K}, not {k!r}", "e.g. k: 4"
        )
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not 0 <= temperature <= MAX_TEMPERATURE
    ):
        raise where.child("temperature").error(
            f"a sampling temperature from 0 to {MAX_TEMPERATURE:g}, not {temperature!r}",
            "e.g. temperature: 0.7 (default: the seed's own, 0.7 when the seed is greedy)",
        )
    given = {key: doc[key] for key in ("matched_to", "k", "temperature") if doc.get(key) is not None}
    return Arm(
        name,
        "best-of-k",
        given=tuple(sorted(given.items())),
        matched_to=matched_to,
        k=k,
        temperature=float(temperature) if temperature is not None else None,
    )


def _fixed(name: str, doc: dict[str, Any], where: PlanField, base: Path) -> Arm:
    from harnessevolve.harness.git import HarnessRepo
    from harnessevolve.harness.load import load_harness

    value, revision = doc.get("path"), doc.get("revision")
    if not isinstance(value, str) or not value.strip():
        raise where.child("path").error(f"must be a harness folder, not {value!r}", "e.g. path: ../hand-edit")
    folder = (base / value).resolve()
    if not (folder / "harness.yaml").is_file():
        raise where.child("path").error(f"no harness.yaml in {folder}", "name a harness folder")
    if revision is not None:
        if not isinstance(revision, str) or not revision.strip():
            raise where.child("revision").error(
                f"must be a git revision, not {revision!r}", "e.g. revision: HEAD~1"
            )
        try:
            HarnessRepo(folder).resolve(revision)
        except HarnessEvolveError as exc:
            raise where.child("revision").error(exc.message, exc.hint) from None
    else:
        try:
            load_harness(folder)
        except HarnessEvolveError as exc:
            raise where.child("path").error(exc.one_line(), exc.hint) from None
    given = {"revision": revision} if revision is not None else {}
    return Arm(name, "harness", given=tuple(given.items()), path=folder, revision=revision)


def _gepa(name: str, doc: dict[str, Any], where: PlanField) -> Arm:
    from harnessevolve.compare.gepa_cell import DEFAULT_REFLECTION_TOKENS, INSTALL_HINT, gepa_available
    from harnessevolve.models.preflight import check_model_name

    if not gepa_available():
        raise where.child("kind").error(
            "a gepa arm needs the gepa package, which is not installed", INSTALL_HINT
        )
    model = doc.get("reflection_model")
    if not isinstance(model, str) or not model.strip():
        raise where.child("reflection_model").error(
            "a gepa arm needs the model GEPA reflects with"
            if model is None
            else f"must be a model name, not {model!r}",
            "e.g. reflection_model: local/qwen2.5-coder-1.5b (any litellm name)",
        )
    try:
        check_model_name(model, option="reflection_model")
    except HarnessEvolveError as exc:
        raise where.child("reflection_model").error(exc.message, exc.hint) from None
    matched_to, budget, max_tokens = doc.get("matched_to"), doc.get("budget"), doc.get("max_tokens")
    if (matched_to is None) == (budget is None):
        raise where.child("matched_to").error(
            "a gepa arm needs matched_to (an evolve arm) or budget, one of them",
            "matched_to: evolve gives GEPA the rollouts that arm spent; budget: N metric calls",
        )
    if matched_to is not None and not isinstance(matched_to, str):
        raise where.child("matched_to").error(
            f"must name an evolve arm, not {matched_to!r}", "e.g. matched_to: evolve"
        )
    if budget is not None and not _count(budget, MAX_BUDGET):
        raise where.child("budget").error(
            f"budget is GEPA's metric calls (rollouts), from 1 to {MAX_BUDGET}, not {budget!r}",
            "e.g. budget: 200",
        )
    if max_tokens is not None and not _count(max_tokens, MAX_REFLECTION_TOKENS):
        raise where.child("max_tokens").error(
            f"the reflection's max tokens, from 1 to {MAX_REFLECTION_TOKENS}, not {max_tokens!r}",
            f"e.g. max_tokens: {DEFAULT_REFLECTION_TOKENS} (the default)",
        )
    given = {
        key: doc[key]
        for key in ("reflection_model", "matched_to", "budget", "max_tokens")
        if doc.get(key) is not None
    }
    return Arm(
        name,
        "gepa",
        given=tuple(sorted(given.items())),
        matched_to=matched_to,
        budget=budget,
        reflection_model=model,
        max_tokens=max_tokens or DEFAULT_REFLECTION_TOKENS,
    )


def _count(value: Any, most: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= most
