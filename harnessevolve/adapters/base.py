"""One way in for every task suite: ``load_benchmark_spec(spec)`` and the adapters behind it.

An adapter turns a suite in someone else's format into a ``core.tasks.Benchmark``. Its contract:

- ``name``: the prefix that selects it explicitly in a spec (``harbor:PATH``, ``nl2bash:5``);
- ``detect(spec) -> bool``: whether a spec written *without* a prefix is this adapter's (a folder
  of the right shape, say). Cheap, no side effects, never raises for a spec it does not know;
- ``load(spec) -> Benchmark``: read the suite and return ``Task`` values whose ``split`` is set
  (use the source's splits, else ``adapters.suite.assign_splits``), whose ``checks`` score a run
  with the check types of ``evaluate/checkers.py`` (``answer``, ``file``, ``command``, ``effect``),
  and, where the source has a solution, whose ``gold`` is tool calls (``bash`` ... then ``submit``)
  that ``harnessevolve refs import`` replays into reference trajectories. Explicit specs pass the
  text after ``NAME:`` (possibly empty); detected ones pass the whole spec. Problems raise
  ``BenchmarkError`` naming the file and, where it helps, the field. No workspace is built and no
  command is run while loading; adapters import only ``core`` (never execute, evaluate, optimize
  or gate).

``ADAPTERS`` maps names to adapters; add yours with ``ADAPTERS["mine"] = MyAdapter()`` (in-process,
for the Python API) or, for the CLI, register it under the ``harnessevolve.adapters`` entry-point
group of your package; ``--benchmark mine:...`` then reaches it (docs/adapters.md has a worked
example).

``load_benchmark_spec`` resolves a spec in this order: ``NAME:REST`` with a registered NAME goes
to that adapter; a bare adapter name is ``NAME:`` (``nl2bash``); otherwise the first adapter whose
``detect`` says yes, trying the native format (a built-in benchmark name or a folder with
benchmark.yaml) first. Anything else is an unknown benchmark. ``subset:LIMITS@SPEC`` (a fixed slice
of SPEC, ``adapters/subset.py``) is read before all of them and SPEC resolved as above.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from harnessevolve.adapters.bfcl import BFCLAdapter
from harnessevolve.adapters.harbor import HarborAdapter, builtin_suites
from harnessevolve.adapters.humaneval import HumanEvalAdapter
from harnessevolve.adapters.nl2bash import NL2BashAdapter
from harnessevolve.adapters.protocol import BenchmarkAdapter
from harnessevolve.adapters.subset import cut_benchmark, parse_slice
from harnessevolve.core.errors import BenchmarkError, HarnessEvolveError
from harnessevolve.core.files import read_yaml
from harnessevolve.core.schema import check
from harnessevolve.core.tasks import (
    Benchmark,
    benchmark_settings,
    builtin_benchmarks,
    load_benchmark,
    resolve_benchmark,
)


class NativeAdapter:
    """harnessevolve's own format: ``benchmark.yaml`` + ``tasks/*.yaml``, or a built-in name."""

    name = "harnessevolve"

    def detect(self, spec: str) -> bool:
        try:
            resolve_benchmark(spec)
        except BenchmarkError:
            return False
        return True

    def load(self, spec: str) -> Benchmark:
        root = resolve_benchmark(spec)
        meta_file = root / "benchmark.yaml"
        meta = read_yaml(meta_file, error=BenchmarkError)
        if isinstance(meta, dict) and "adapter" in meta:  # the folder names its own adapter
            check(meta, "benchmark", file=str(meta_file), error=BenchmarkError)
            from harnessevolve.adapters.external import folder_adapter

            search = benchmark_settings(meta, root, str(meta_file)).python_path
            return load_with(folder_adapter(root, meta, str(meta_file), search), str(root))  # type: ignore[arg-type]
        return load_benchmark(spec)


ENTRY_POINT_GROUP = "harnessevolve.adapters"
ADAPTERS: dict[str, BenchmarkAdapter] = {
    "harnessevolve": NativeAdapter(),
    "harbor": HarborAdapter(),
    "nl2bash": NL2BashAdapter(),
    "bfcl": BFCLAdapter(),
    "humaneval": HumanEvalAdapter(),
}


def formats_hint() -> str:
    builtin = ", ".join(builtin_benchmarks() + builtin_suites()) or "none"
    others = sorted(set(ADAPTERS) - {"harnessevolve", "harbor", "nl2bash", "bfcl", "humaneval"})
    extra = f"; registered adapters: {', '.join(f'{n}:...' for n in others)}" if others else ""
    return (
        f"built-in benchmarks: {builtin}; or a folder with benchmark.yaml; a Harbor task folder "
        f"(or harbor:PATH); nl2bash[:SUBSET]; bfcl[:CATEGORY[:INDEXES]]; humaneval[:INDEXES]; "
        f"a fixed slice of any of them, subset:validation=N,test=N@BENCHMARK{extra}"
    )


def installed_adapters() -> dict[str, BenchmarkAdapter]:
    """Adapters other packages register under the ``harnessevolve.adapters`` entry-point group
    (a class, instantiated without arguments, or an instance); ``ADAPTERS`` wins on a name clash."""
    from importlib.metadata import entry_points

    found: dict[str, BenchmarkAdapter] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in ADAPTERS:
            continue
        try:
            loaded = point.load()
            found[point.name] = loaded() if isinstance(loaded, type) else loaded
        except Exception as exc:  # a third party's import error: name it, never crash the CLI
            raise BenchmarkError(
                f"adapter {point.name!r} ({point.value}) failed to load: {exc}",
                field="--benchmark",
                hint="fix or uninstall the package that registers it",
            ) from exc
    return found


def adapter_identity(adapter: object) -> str:
    """``name@version`` of an adapter (``version`` optional, default ``0``): the rollout cache key's."""
    return f"{getattr(adapter, 'name', type(adapter).__name__)}@{getattr(adapter, 'version', '0')}"


def _failed(adapter: object, call: str, exc: Exception) -> BenchmarkError:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return BenchmarkError(
        f"adapter {getattr(adapter, 'name', type(adapter).__name__)!r} ({type(adapter).__module__}) "
        f"{call} raised {type(exc).__name__}: {first}",
        field="--benchmark",
        hint="the adapter's own code failed; fix it (HARNESSEVOLVE_DEBUG=1 shows the traceback)",
    )


def detect_with(adapter: BenchmarkAdapter, spec: str) -> bool:
    """``adapter.detect(spec)``; an exception from the adapter's own code names the adapter."""
    try:
        return bool(adapter.detect(spec))
    except BenchmarkError:
        raise
    except Exception as exc:
        raise _failed(adapter, f"detect({spec!r})", exc) from exc


def load_with(adapter: BenchmarkAdapter, spec: str) -> Benchmark:
    """``adapter.load(spec)``, checked to be a ``Benchmark`` and stamped with the adapter's
    identity; an exception from the adapter's own code names the adapter."""
    try:
        benchmark = adapter.load(spec)
    except HarnessEvolveError:
        raise
    except Exception as exc:
        raise _failed(adapter, f"load({spec!r})", exc) from exc
    if not isinstance(benchmark, Benchmark):
        raise BenchmarkError(
            f"adapter {getattr(adapter, 'name', '?')!r} load({spec!r}) returned "
            f"{type(benchmark).__name__}, not a Benchmark",
            field="--benchmark",
            hint="load(spec) must return harnessevolve.core.tasks.Benchmark; see docs/adapters.md",
        )
    return benchmark if benchmark.adapter else replace(benchmark, adapter=adapter_identity(adapter))


def _resolve(spec: str, adapters: dict[str, BenchmarkAdapter]) -> Benchmark | None:
    prefix, colon, rest = spec.partition(":")
    if colon and prefix in adapters:
        return load_with(adapters[prefix], rest)
    if spec in adapters and not Path(spec).exists():
        return load_with(adapters[spec], "")
    for adapter in adapters.values():
        if detect_with(adapter, spec):
            return load_with(adapter, spec)
    return None


def load_benchmark_spec(spec: str, adapters: tuple[str, ...] = ()) -> Benchmark:
    """The benchmark a ``--benchmark`` value names, whatever its format (see the module docstring).

    ``adapters``: ``module:attr`` references (``--adapter``) imported and tried first, under their
    own ``name``; then ``ADAPTERS``; installed (entry-point) adapters only when none fits.
    """
    sliced = parse_slice(spec)
    if sliced is not None:  # subset:LIMITS@SPEC, a fixed slice of any benchmark (adapters/subset.py)
        inner = load_benchmark_spec(sliced.inner, adapters)
        return cut_benchmark(inner, sliced.limits, source=spec, salt=sliced.salt)
    if adapters:
        from harnessevolve.adapters.external import import_adapter

        named: dict[str, BenchmarkAdapter] = {}
        for ref in adapters:
            adapter: Any = import_adapter(ref)
            named[str(adapter.name)] = adapter
        ordered = {**named, **{k: v for k, v in ADAPTERS.items() if k not in named}}
        benchmark = _resolve(spec, ordered)
        if benchmark is not None:
            return benchmark
    benchmark = _resolve(spec, ADAPTERS)
    if benchmark is None:
        benchmark = _resolve(spec, installed_adapters())
    if benchmark is None:
        raise BenchmarkError(f"unknown benchmark {spec!r}", field="--benchmark", hint=formats_hint())
    return benchmark
