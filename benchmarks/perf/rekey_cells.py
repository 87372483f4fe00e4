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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--made-in", type=Path, required=True, help="the checkout the cells ran from")
    args = parser.parse_args()
    suites: dict[str, tuple[str, str]] = {}
    status = 0
    for path in sorted(args.folder.glob("cells/*/seed-*/result.json")):
        doc = json.loads(path.read_text())
        bench = doc["benchmark"]
        spec = bench["spec"]
        if spec not in suites:
            suite = load_benchmark_spec(spec)
            suites[spec] = (legacy_sha(suite, args.made_in), benchmark_identity(suite, spec)["test_sha"])
        old, new = suites[spec]
        if bench["test_sha"] == new:
            print(f"{path}: already {new}")
        elif bench["test_sha"] == old:
            bench["test_sha"] = new
            path.write_text(json.dumps(doc, indent=2) + "\n")
            print(f"{path}: {old} -> {new}")
        else:
            print(f"{path}: {bench['test_sha']} is neither {old} (made in {args.made_in}) nor {new}; left")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
