"""README's and docs/' efficacy tables are what their committed compare cells give
(``benchmarks/perf/compare_tables.py``): a stale table, or a cell changed under it, fails."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from typing import Any

from compare_plans import compare, write_plan

from harnessevolve.core.paths import builtin_dir

PERF = builtin_dir("benchmarks") / "perf"
ROOT = PERF.parents[1]


def load_script() -> Any:
    spec = importlib.util.spec_from_file_location("compare_tables", PERF / "compare_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["compare_tables"] = module
    spec.loader.exec_module(module)
    return module


tables = load_script()


def test_the_tables_in_readme_and_docs_are_those_their_cells_give() -> None:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    quoting = [f for f in files if "<!-- compare-table:" in f.read_text()]
    assert ROOT / "README.md" in quoting
    assert tables.main(["--check", *map(str, quoting)]) == 0


def test_a_block_is_rewritten_from_the_cells_and_a_changed_cell_makes_it_stale(
    bench: Path, hand: Path, tmp_path: Path
) -> None:
    plan = write_plan(
        tmp_path,
        model="scripted/policy:learner",
        benchmark=str(bench),
        seeds=[0],
        arms=[{"kind": "seed"}, {"name": "hand", "kind": "harness", "path": str(hand)}],
    )
    out = tmp_path / "out"
    assert compare(plan, "--out", out).exit_code == 0
    page = tmp_path / "page.md"
    page.write_text(f"# Measured\n<!-- compare-table: {out} -->\nold\n<!-- /compare-table -->\nafter\n")
    assert tables.main(["--check", str(page)]) == 1
    assert tables.main(["--write", str(page)]) == 0
    text = page.read_text()
    assert "| seed | 0.0 |" in text and "| hand | 100.0 |" in text and text.endswith("after\n")
    assert (
        "Load average (1 min) at each cell's start:" in text and "Made by: `harnessevolve compare run" in text
    )
    assert tables.main(["--check", str(page)]) == 0
    shutil.rmtree(out / "cells" / "hand")  # a cell gone: the quoted table no longer holds
    assert tables.main(["--check", str(page)]) == 1
