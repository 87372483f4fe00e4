"""Re-key compare cells made before a test split's identity stopped counting where the checkout sat.

Until 2026-12-07 a cell's ``benchmark.test_sha`` hashed each task's ``python_path`` as an absolute
path, so BFCL cells (their checker lives in harnessevolve/adapters/bfcl_runtime) made from one git
worktree could not be resumed or merged from another. This script recomputes, for every result file
under FOLDER, the old hash as it was made from the checkout ``--made-in`` names; only where that
equals the recorded ``test_sha`` (the same tasks, only another path) is it replaced by today's
path-free hash. Nothing else in the file changes; a cell that matches neither is reported and left.

    .venv/bin/python benchmarks/perf/rekey_cells.py benchmarks/perf/results/bfcl-1.5b --made-in /work/bfclrun
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.compare.identity import benchmark_identity
from harnessevolve.core.tasks import Benchmark
from harnessevolve.scoring.rollout_cache import task_fingerprint

PACKAGE = Path(__file__).resolve().parents[2] / "harnessevolve"


def legacy_sha(suite: Benchmark, made_in: Path) -> str:
    """The test split's hash as it was computed from a checkout at ``made_in``."""
    digest = hashlib.sha256()
    for task in sorted(suite.split("test"), key=lambda t: t.id):
        moved = tuple(
            str(made_in / "harnessevolve" / Path(p).relative_to(PACKAGE))
            if Path(p).is_relative_to(PACKAGE)
            else p
            for p in task.python_path
        )
        digest.update(f"{task.id}\0{task_fingerprint(replace(task, python_path=moved))}\n".encode())
    return digest.hexdigest()[:16]


def plant_cells(out: Path, made_in: Path, suite: Benchmark, spec: str) -> None:
    """Two made-up cells under ``out``: ``seed`` keyed by the old hash of a checkout at ``made_in``
    (to be re-keyed), ``other`` keyed otherwise (to be left)."""
    for arm, sha in (("seed", legacy_sha(suite, made_in)), ("other", "0123456789abcdef")):
        folder = out / "cells" / arm / "seed-0"
        folder.mkdir(parents=True)
        doc = {"arm": {"name": arm}, "benchmark": {"name": suite.name, "spec": spec, "test_sha": sha}}
        (folder / "result.json").write_text(json.dumps(doc, indent=2) + "\n")


def smoke() -> int:
    """The two cells of ``plant_cells`` on BFCL's default set in a temporary folder; exit 0 when
    the first was re-keyed and the second left."""
    import tempfile

    spec = "bfcl"
    suite = load_benchmark_spec(spec)
    with tempfile.TemporaryDirectory() as tmp:
        made_in, out = Path(tmp) / "old-checkout", Path(tmp) / "results"
        plant_cells(out, made_in, suite, spec)
        status = rekey(out, made_in)
        new = benchmark_identity(suite, spec)["test_sha"]
        read = json.loads((out / "cells" / "seed" / "seed-0" / "result.json").read_text())
    return 0 if status == 1 and read["benchmark"]["test_sha"] == new else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, nargs="?")
    parser.add_argument("--made-in", type=Path, help="the checkout the cells ran from")
    parser.add_argument("--smoke", action="store_true", help="re-key two made-up cells in a temporary folder")
    args = parser.parse_args()
    if args.smoke:
        return smoke()
    if args.folder is None or args.made_in is None:
        parser.error("FOLDER and --made-in are required")
    return rekey(args.folder, args.made_in)


def rekey(folder: Path, made_in: Path) -> int:
    """Re-key the cells under ``folder`` made from ``made_in``; 1 when one matched neither hash."""
    suites: dict[str, tuple[str, str]] = {}
    status = 0
    for path in sorted(folder.glob("cells/*/seed-*/result.json")):
        doc = json.loads(path.read_text())
        bench = doc["benchmark"]
        spec = bench["spec"]
        if spec not in suites:
            suite = load_benchmark_spec(spec)
            suites[spec] = (legacy_sha(suite, made_in), benchmark_identity(suite, spec)["test_sha"])
        old, new = suites[spec]
        if bench["test_sha"] == new:
            print(f"{path}: already {new}")
        elif bench["test_sha"] == old:
            bench["test_sha"] = new
            path.write_text(json.dumps(doc, indent=2) + "\n")
            print(f"{path}: {old} -> {new}")
        else:
            print(f"{path}: {bench['test_sha']} is neither {old} (made in {made_in}) nor {new}; left")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
