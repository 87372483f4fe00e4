"""A cell's benchmark identity: the test split's content, never where the checkout or folder sits."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from harnessevolve.compare.identity import benchmark_identity
from harnessevolve.core.tasks import Benchmark, Task

PACKAGE = Path(__file__).resolve().parents[2] / "harnessevolve"


def _suite(root: Path, *python_path: str) -> Benchmark:
    task = Task(id="t1", instruction="do it", split="test", checks=(), python_path=python_path)
    other = Task(id="v1", instruction="check it", split="validation", checks=(), python_path=python_path)
    return Benchmark(name="b", root=root, tasks=(task, other))


def _sha(suite: Benchmark) -> str:
    return benchmark_identity(suite, str(suite.root))["test_sha"]


def test_a_code_folder_counts_by_its_content_not_its_path(tmp_path: Path) -> None:
    here = tmp_path / "here" / "tools"
    here.mkdir(parents=True)
    (here / "check.py").write_text("def score(x):\n    return x\n")
    moved = tmp_path / "elsewhere" / "tools"
    shutil.copytree(here, moved)
    assert _sha(_suite(tmp_path, str(here))) == _sha(_suite(tmp_path / "other", str(moved)))
    # another checker is another benchmark
    (moved / "check.py").write_text("def score(x):\n    return 0\n")
    assert _sha(_suite(tmp_path, str(here))) != _sha(_suite(tmp_path, str(moved)))


def test_a_folder_inside_harnessevolve_counts_by_its_place_in_the_package(tmp_path: Path) -> None:
    """Two checkouts of one commit (a git worktree per cell) give one identity; the package's code
    is the commit the cell records, so only the folder's place in the package counts."""
    inside = str(PACKAGE / "adapters" / "bfcl_runtime")
    worktree = tmp_path / "worktree" / "harnessevolve" / "adapters" / "bfcl_runtime"
    shutil.copytree(inside, worktree)
    base = _sha(_suite(tmp_path, inside))
    assert base != _sha(_suite(tmp_path, str(worktree)))  # outside this package: by its content
    assert base != _sha(_suite(tmp_path, str(PACKAGE / "adapters")))
    assert base == _sha(
        _suite(tmp_path / "x", str(PACKAGE / "adapters" / ".." / "adapters" / "bfcl_runtime"))
    )


def test_the_test_split_alone_makes_the_identity(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    changed = replace(suite, tasks=(suite.tasks[0], replace(suite.tasks[1], instruction="other")))
    assert _sha(suite) == _sha(changed)
    reworded = replace(suite, tasks=(replace(suite.tasks[0], instruction="other"), suite.tasks[1]))
    assert _sha(suite) != _sha(reworded)
    assert benchmark_identity(suite, "x")["test_tasks"] == 1
