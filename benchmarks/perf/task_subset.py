"""The measurement scripts' fixed slices: ``efficacy-subset:validation=12,test=16@SPEC``, the
package's slice (``adapters/subset.py``) with a salt of its own, so that it keeps choosing the tasks
of the results already committed: the same as ``subset:validation=12,test=16,salt=efficacy-subset@SPEC``.
Registered in ``adapters.ADAPTERS`` on import."""

from __future__ import annotations

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.adapters.base import ADAPTERS
from harnessevolve.adapters.subset import cut_benchmark, split_slice
from harnessevolve.core.tasks import Benchmark

SUBSET = "efficacy-subset"
SUBSET_SALT = "efficacy-subset"


class SubsetAdapter:
    """``efficacy-subset:LIMITS@SPEC``: SPEC cut as ``subset:LIMITS@SPEC`` is, in this salt's order
    (the same tasks in every process and every arm), with SPEC's references and adapter identity."""

    name = SUBSET

    def detect(self, spec: str) -> bool:
        return False

    def load(self, spec: str) -> Benchmark:
        source = f"{SUBSET}:{spec}"
        sliced = split_slice(spec, source, salt=SUBSET_SALT)
        inner = load_benchmark_spec(sliced.inner)
        return cut_benchmark(inner, sliced.limits, source=source, salt=sliced.salt)


ADAPTERS.setdefault(SUBSET, SubsetAdapter())  # type: ignore[arg-type]
