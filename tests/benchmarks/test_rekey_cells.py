"""benchmarks/perf/rekey_cells.py: compare cells keyed by the old, path-bound test-split hash get
today's, and only where the old one can be recomputed from the checkout named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harnessevolve.compare.identity import benchmark_identity
from harnessevolve.core.paths import builtin_dir

PERF = builtin_dir("benchmarks") / "perf"


def test_rekey_cells_re_keys_only_cells_whose_old_hash_it_can_recompute(tmp_path: Path) -> None:
    """benchmarks/perf/rekey_cells.py: a cell keyed by the old, path-bound hash from the checkout
    named gets today's hash; one keyed otherwise is left, and the script exits 1."""
    pytest.importorskip("bfcl_eval")
    from harnessevolve.adapters import load_benchmark_spec

    sys.path.insert(0, str(PERF))
    try:
        from rekey_cells import plant_cells
    finally:
        sys.path.pop(0)
    spec = "bfcl"  # 30 tasks, some of them test
    suite = load_benchmark_spec(spec)
    made_in = tmp_path / "old-checkout"
    cells = tmp_path / "results"
    plant_cells(cells, made_in, suite, spec)
    script = PERF / "rekey_cells.py"
    done = subprocess.run(
        [sys.executable, str(script), str(cells), "--made-in", str(made_in)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    new = benchmark_identity(suite, spec)["test_sha"]
    seed = json.loads((cells / "cells" / "seed" / "seed-0" / "result.json").read_text())
    assert seed["benchmark"]["test_sha"] == new and seed["arm"] == {"name": "seed"}  # nothing else changed
    other = json.loads((cells / "cells" / "other" / "seed-0" / "result.json").read_text())
    assert other["benchmark"]["test_sha"] == "0123456789abcdef"
    assert "is neither" in done.stdout and f"-> {new}" in done.stdout
