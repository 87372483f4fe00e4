"""One arm of a plan, checked field by field: its kind, name and the fields its kind takes.

Kinds: ``seed`` (the seed harness as it is), ``evolve`` (a ``run`` with ``options``: any run option
but those the plan sets for every arm), ``best-of-k`` (the seed harness sampled k times per test
task; k matched to an evolve arm's rollouts with ``matched_to``, or given by hand with ``k``) and
``harness`` (a fixed harness folder, optionally at a git ``revision``). ``gepa`` is refused: not
yet supported by compare.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.compare.options import PlanField, checked_options, run_options
from harnessevolve.core.errors import HarnessEvolveError

ARM_KINDS = ("seed", "evolve", "best-of-k", "harness")
NOT_YET = {
    "gepa": "leave the arm out: benchmarks/perf/vs_gepa.py runs GEPA beside harnessevolve for now",
}
"""Arm kinds the issue names that compare refuses for now, and what to do instead."""
KIND_FIELDS = {
    "seed": ("name", "kind"),
    "evolve": ("name", "kind", "options"),
    "best-of-k": ("name", "kind", "matched_to", "k", "temperature"),
    "harness": ("name", "kind", "path", "revision"),
}
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
    if kind in NOT_YET:
        raise where.child("kind").error(
            f"arm kind {kind!r} is not yet supported by compare", NOT_YET[str(kind)]
        )
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
    return Arm(name, kind)


def _evolve(name: str, doc: dict[str, Any], where: PlanField, base: Path) -> Arm:
    at = where.child("options")
    options = checked_options(doc.get("options"), at, base=base)
    _check_evolve(options, at)
    spelled = run_options()
    raw = {spelled[str(k)].key: v for k, v in (doc.get("options") or {}).items()}
    given = {key: raw[key] if isinstance(value, Path) else _plain(value) for key, value in options.items()}
    return Arm(name, "evolve", tuple(sorted(options.items())), (("options", dict(sorted(given.items()))),))


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
