"""References where the method needs them: the shipped NL2Bash and BFCL references serve every subset
of their adapter (one folder, other subsets' files skipped), the user's reference folder is read
too and is where ``refs import`` writes for an installed package, and the no-references warning
names a command that works (``-b`` with the spec the run was given), with a different note for a
suite whose tasks have no gold solutions."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from harnessevolve.adapters.suite import AdaptedBenchmark
from harnessevolve.cli import refs_cmd
from harnessevolve.core import atif, paths
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import Check, GoldCall, Task
from harnessevolve.scoring.reference_coverage import missing_references_warning
from harnessevolve.scoring.references import load_references, user_references_dir

SHIPPED = paths.builtin_dir("trajectories")


def task(task_id: str, *, gold: bool = True) -> Task:
    return Task(
        id=task_id,
        instruction="Print the last line of a.txt.",
        split="train",
        checks=(Check(type="answer", expected="x"),),
        gold=(GoldCall("submit", {"answer": "x"}),) if gold else (),
    )


def reference_file(folder: Path, task_id: str) -> None:
    doc = json.loads((SHIPPED / "shell-basics" / "count-lines-01.json").read_text())
    doc.setdefault("extra", {})["task_id"] = task_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{task_id}.json").write_text(json.dumps(doc))


def suite(folder: Path, ids: tuple[str, ...], *, shared: bool, gold: bool = True) -> AdaptedBenchmark:
    return AdaptedBenchmark(
        name="sub",
        root=folder / "root",
        tasks=tuple(task(t, gold=gold) for t in ids),
        references=folder / "refs",
        source="mine:sub",
        shared_references=shared,
    )


@pytest.fixture(autouse=True)
def user_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESSEVOLVE_REFERENCES", str(tmp_path / "user-refs"))
    return tmp_path / "user-refs"


def test_a_shared_folder_serves_each_subset_and_skips_the_others(tmp_path: Path) -> None:
    for t in ("a-1", "a-2", "b-1"):
        reference_file(tmp_path / "refs", t)
    assert sorted(load_references(suite(tmp_path, ("a-1", "a-2"), shared=True))) == ["a-1", "a-2"]
    with pytest.raises(BenchmarkError, match="reference for unknown task 'b-1'"):
        load_references(suite(tmp_path, ("a-1", "a-2"), shared=False))


def test_the_user_folder_is_read_after_the_benchmarks(tmp_path: Path, user_folder: Path) -> None:
    bench = suite(tmp_path, ("a-1", "a-2"), shared=True)
    reference_file(tmp_path / "refs", "a-1")
    assert user_references_dir(bench) == user_folder / "refs"  # a shared folder keeps its name
    reference_file(user_references_dir(bench), "a-2")
    assert sorted(load_references(bench)) == ["a-1", "a-2"]


def test_refs_import_writes_to_the_user_folder_for_an_installed_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = suite(tmp_path, ("a-1",), shared=True)
    monkeypatch.setattr(paths, "inside_package", lambda path: Path(path) == bench.references_dir)
    assert refs_cmd.reference_output_dir(bench, None) == user_references_dir(bench)


def test_the_warning_names_a_working_command_or_says_there_is_no_gold(tmp_path: Path) -> None:
    with_gold = suite(tmp_path, ("a-1", "a-2"), shared=False)
    warning = missing_references_warning(with_gold, {})
    assert warning is not None and "`harnessevolve refs import -b mine:sub`" in warning
    assert str(with_gold.root) not in warning
    without = suite(tmp_path, ("a-1",), shared=False, gold=False)
    note = missing_references_warning(without, {})
    assert note is not None and "no gold solutions" in note and "refs generate -b mine:sub" in note
    assert missing_references_warning(with_gold, {"a-1": object()}) is None


@pytest.mark.skipif(importlib.util.find_spec("icalfa") is None, reason="needs icalfa (the nl2bash extra)")
@pytest.mark.parametrize("spec", ["nl2bash", "nl2bash:5", "nl2bash:1,3"])
def test_every_nl2bash_subset_has_its_shipped_references(spec: str) -> None:
    from harnessevolve.adapters.nl2bash import load_nl2bash

    bench = load_nl2bash(spec.partition(":")[2])
    references = load_references(bench)
    assert {t.id for t in bench.tasks} <= set(references)  # every workspace-only task, every split
    assert missing_references_warning(bench, references) is None


def test_shipped_nl2bash_references_are_gold_replays_that_passed() -> None:
    files = sorted((SHIPPED / "nl2bash").glob("*.json"))
    assert len(files) >= 200
    for path in files[:: max(1, len(files) // 20)]:
        reference = atif.load(path)
        assert reference.extra.get("reference") == "gold-replay" and reference.extra.get("passed") is True
        calls = [c for s in reference.agent_steps for c in s.tool_calls]
        assert [c.function_name for c in calls] == ["bash", "submit"]
        assert calls[1].arguments["answer"] == calls[0].arguments["command"]
