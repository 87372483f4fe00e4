"""Task suites in other formats (Harbor / Terminal-Bench folders, NL2Bash from icalfa, your own)
behind one entry point, ``load_benchmark_spec``. See base.py for the adapter contract and
docs/adapters.md for a worked example."""

from harnessevolve.adapters.base import ADAPTERS, load_benchmark_spec
from harnessevolve.adapters.protocol import BenchmarkAdapter
from harnessevolve.adapters.suite import AdaptedBenchmark, assign_splits

__all__ = ["ADAPTERS", "AdaptedBenchmark", "BenchmarkAdapter", "assign_splits", "load_benchmark_spec"]
