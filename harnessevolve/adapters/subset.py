"""``subset:validation=8,test=12@SPEC``: a fixed slice of any benchmark, for cheap runs and gates.

SPEC is any ``--benchmark`` value (a built-in name, a folder, ``nl2bash``, an adapter's spec,
another slice). Each split named in the limits is cut to its first N tasks in a seeded hash order
of the task ids; a split not named stays whole. The order is the same in every process, run and
``gate``, and a split's first N do not depend on the other splits' limits, so ``test=12`` is a
part of ``test=24``. ``salt=WORD`` among the limits seeds another order (other tasks, as fixed):
``subset:validation=8,salt=b@nl2bash``.

A slice is not a new benchmark: it keeps SPEC's adapter identity (``Benchmark.adapter``, part of the
rollout cache key; a task is keyed by its content, so a slice and the whole benchmark share cached
rollouts) and reads SPEC's reference folders, skipping the files of tasks it does not keep (the
rules of ``AdaptedBenchmark.shared_references``); ``refs import`` and ``refs generate`` on a slice
write where they would for SPEC. It is handled by ``load_benchmark_spec`` before any adapter, so
``--adapter`` adapters reach SPEC as they would without the slice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harnessevolve.adapters.suite import AdaptedBenchmark, reference_folder_name, split_fraction
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import SPLITS, Benchmark, Split

PREFIX = "subset"
SALT = "subset"
"""Seeds the hash order; another salt chooses other tasks (the measurement scripts keep their own)."""
HINT = "write subset:SPLIT=N[,SPLIT=N][,salt=WORD]@BENCHMARK, e.g. subset:validation=8,test=12@nl2bash"


@dataclass(frozen=True)
class Slice:
    """A parsed ``subset:LIMITS@SPEC``: the kept count per split, the inner spec, the order's salt."""

    limits: dict[Split, int]
    inner: str
    salt: str = SALT


def parse_slice(spec: str) -> Slice | None:
    """The slice of ``subset:LIMITS@SPEC``; ``None`` for a spec without the prefix."""
    head, colon, rest = spec.partition(":")
    return split_slice(rest, spec) if head == PREFIX and colon else None


def split_slice(text: str, spec: str, *, salt: str = SALT) -> Slice:
    """``LIMITS@SPEC`` -> its ``Slice`` (``salt`` unless the limits name one); ``spec`` (the whole
    value) names it in errors."""
    limits_text, at, inner = text.partition("@")
    items = [item for item in limits_text.split(",")]
    salts = [item.partition("=")[2].strip() for item in items if item.partition("=")[0].strip() == "salt"]
    if len(salts) > 1 or (salts and not salts[0]):
        why = "named twice" if len(salts) > 1 else "salt=WORD: a word that seeds another order"
        raise BenchmarkError(f"{spec}: bad salt ({why})", field="--benchmark", hint=HINT)
    rest = ",".join(item for item in items if item.partition("=")[0].strip() != "salt")
    limits = parse_limits(rest, spec)
    if not at or not inner.strip():
        raise BenchmarkError(f"{spec}: no benchmark after '@'", field="--benchmark", hint=HINT)
    return Slice(limits, inner.strip(), salts[0] if salts else salt)


def parse_limits(text: str, spec: str) -> dict[Split, int]:
    """``validation=8,test=12`` -> ``{"validation": 8, "test": 12}``; each split once, counts >= 1."""
    limits: dict[Split, int] = {}
    for item in text.split(","):
        split, _, count = (part.strip() for part in item.partition("="))
        known = next((s for s in SPLITS if s == split), None)
        number = int(count) if count.isascii() and count.isdecimal() else 0
        if known is None or number < 1 or known in limits:
            why = "named twice" if known in limits else f"a split of {', '.join(SPLITS)} = a count >= 1"
            raise BenchmarkError(
                f"{spec}: bad limit {item.strip()!r} ({why})", field="--benchmark", hint=HINT
            )
        limits[known] = number
    return limits


def cut_benchmark(
    full: Benchmark, limits: Mapping[Split, int], *, source: str, salt: str = SALT
) -> AdaptedBenchmark:
    """``full`` with each split in ``limits`` cut to its first N tasks in the ``salt`` hash order;
    the tasks keep ``full``'s order, its adapter identity and its reference folders."""
    keep: set[str] = set()
    for split in SPLITS:
        ordered = sorted(full.split(split), key=lambda t: (split_fraction(t.id, salt), t.id))
        keep |= {t.id for t in (ordered[: limits[split]] if split in limits else ordered)}
    shown = ",".join(f"{s}={n}" for s, n in limits.items())
    return AdaptedBenchmark(
        name=full.name,
        root=full.root,
        tasks=tuple(t for t in full.tasks if t.id in keep),
        description=f"{full.description} (slice {shown})".strip(),
        adapter=full.adapter,
        references=full.references_dir,
        source=source,
        shared_references=True,
        references_name=reference_folder_name(full),
    )
