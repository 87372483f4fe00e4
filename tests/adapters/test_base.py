"""`load_benchmark_spec`: which adapter a spec reaches, errors, splits, and the docs' own adapter."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harnessevolve.adapters import ADAPTERS, BenchmarkAdapter, assign_splits, base, load_benchmark_spec
from harnessevolve.adapters.suite import HASH_SPLIT_MIN_TASKS, AdaptedBenchmark
from harnessevolve.core import paths
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import load_benchmark

DOCS = paths.project_root() / "docs" / "adapters.md"


def test_native_benchmarks_load_as_before() -> None:
    assert load_benchmark_spec("shell-basics") == load_benchmark("shell-basics")
    folder = paths.builtin_dir("benchmarks") / "shell-basics"
    assert load_benchmark_spec(str(folder)).tasks == load_benchmark("shell-basics").tasks
    assert load_benchmark_spec(f"harnessevolve:{folder}").name == "shell-basics"


def test_unknown_spec_names_it_and_lists_the_formats(tmp_path: Path) -> None:
    for spec in ("nope", str(tmp_path), "unknown-adapter:x"):
        with pytest.raises(BenchmarkError) as err:
            load_benchmark_spec(spec)
        assert err.value.message == f"unknown benchmark {spec!r}" and err.value.field == "--benchmark"
        assert "shell-basics" in err.value.hint and "harbor:PATH" in err.value.hint
        assert "nl2bash[:SUBSET]" in err.value.hint


def test_the_builtin_adapters_follow_the_protocol() -> None:
    assert {"harnessevolve", "harbor", "nl2bash"} <= set(ADAPTERS)
    assert all(isinstance(a, BenchmarkAdapter) for a in ADAPTERS.values())
    assert not ADAPTERS["nl2bash"].detect("nl2bash") and not ADAPTERS["harbor"].detect("shell-basics")


def test_small_suites_get_every_split_and_large_ones_stable_hash_splits() -> None:
    assert assign_splits([]) == {}
    assert sorted(assign_splits(["a", "b", "c"]).values()) == ["test", "train", "validation"]
    assert assign_splits(["a", "b", "c"], {"a": "test"})["a"] == "test"
    ids = [f"task-{i:03d}" for i in range(200)]
    splits = assign_splits(ids)
    counts = {s: list(splits.values()).count(s) for s in ("train", "validation", "test")}
    assert 80 < counts["train"] < 120 and 30 < counts["validation"] < 70 and 30 < counts["test"] < 70
    grown = assign_splits([*ids, "one-more"])
    assert all(grown[t] == splits[t] for t in ids)  # adding a task moves no other
    assert len(ids) >= HASH_SPLIT_MIN_TASKS


def docs_example() -> str:
    """The adapter example of docs/adapters.md: the python block after `<!-- example-adapter -->`."""
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"<!-- example-adapter -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert found, "docs/adapters.md lost its example adapter"
    return found.group(1)


def test_the_documented_example_adapter_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "__docs_example__", SimpleNamespace())
    before = dict(ADAPTERS)
    try:
        namespace: dict = {"__name__": "__docs_example__"}
        exec(compile(docs_example(), str(DOCS), "exec"), namespace)
        assert "qa-csv" in ADAPTERS and isinstance(ADAPTERS["qa-csv"], BenchmarkAdapter)
        Path("capitals.qa.csv").write_text(
            "id,question,answer\nfr,Capital of France?,Paris\nit,Capital of Italy?,Rome\n"
            "es,Capital of Spain?,Madrid\njp,Capital of Japan?,Tokyo\n"
        )
        for spec in ("qa-csv:capitals.qa.csv", "capitals.qa.csv"):
            bench = load_benchmark_spec(spec)
            assert bench.name == "capitals" and [t.id for t in bench.tasks] == ["fr", "it", "es", "jp"]
            assert {t.split for t in bench.tasks} == {"train", "validation", "test"}
            assert bench.task("fr").checks[0].expected == "Paris"
            assert bench.task("fr").gold[0].arguments == {"answer": "Paris"}
    finally:
        ADAPTERS.clear()
        ADAPTERS.update(before)


def test_installed_adapters_come_from_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    class Fake:
        name = "fake"

        def detect(self, spec: str) -> bool:
            return False

        def load(self, spec: str) -> AdaptedBenchmark:
            raise BenchmarkError(f"fake got {spec!r}")

    point = SimpleNamespace(name="fake", value="pkg:Fake", load=lambda: Fake)
    monkeypatch.setattr(
        "importlib.metadata.entry_points", lambda group: [point] if group == base.ENTRY_POINT_GROUP else []
    )
    with pytest.raises(BenchmarkError, match="fake got 'x'"):
        load_benchmark_spec("fake:x")

    def broken():
        raise ImportError("no module named pkg")

    monkeypatch.setattr(point, "load", broken)
    with pytest.raises(BenchmarkError, match="adapter 'fake' \\(pkg:Fake\\) failed to load"):
        load_benchmark_spec("fake:x")
    assert load_benchmark_spec("shell-basics").name == "shell-basics"  # plugins are tried last


def test_adapters_import_only_core() -> None:
    """Adapters sit beside the stages: they may use core, never execute/evaluate/optimize/gate/pipeline."""
    import ast

    from test_architecture import PACKAGE, imported_modules, module_name

    offending = []
    for path in sorted((PACKAGE / "adapters").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name in imported_modules(tree, module_name(path), path.name == "__init__.py"):
            parts = name.split(".")
            if parts[0] == "harnessevolve" and len(parts) > 1 and parts[1] not in ("core", "adapters"):
                offending.append(f"{path.name} imports {name}")
    assert offending == []
