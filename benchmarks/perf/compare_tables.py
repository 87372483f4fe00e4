"""The efficacy tables README and docs/ quote, printed from committed compare cells.

A block in a Markdown file::

    <!-- compare-table: benchmarks/perf/results/nl2bash-0.5b -->
    (the table: written by this script)
    <!-- /compare-table -->

holds what ``harnessevolve compare merge FOLDER`` prints for the result files committed in FOLDER
(arms in the order of the folder's plan copy), with the cells' load averages and the command that
makes the cells. ``--check`` (what the tests run) fails when a block differs from what its cells
give; ``--write`` rewrites the blocks.

    .venv/bin/python benchmarks/perf/compare_tables.py --write README.md docs/compare.md
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

from harnessevolve.compare.merge import load_results
from harnessevolve.compare.table import build_table, markdown

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(
    r"(?P<open><!-- compare-table: (?P<folder>[^\s]+) -->\n)(?P<body>.*?)(?P<close><!-- /compare-table -->)",
    re.DOTALL,
)


def arm_order(folder: Path) -> list[str]:
    plan = folder / "plan.yaml"
    if not plan.is_file():
        return []
    doc = yaml.safe_load(plan.read_text()) or {}
    return [str(a.get("name", a.get("kind"))) for a in doc.get("arms", []) if isinstance(a, dict)]


def table_text(folder: Path) -> str:
    """The block's body for ``folder``'s committed cells."""
    results = load_results([folder])
    if not results:
        return f"(no cell of {folder.name} has finished yet)\n"
    table = build_table(results, arm_order(folder))
    loads = [r.load_average.get("start", [None])[0] for r in results]
    shown = [f"{x:.1f}" for x in loads if isinstance(x, (int, float))]
    commands = sorted({r.command for r in results if r.command})
    cells = ", ".join(
        f"{r.cell_id} ({str(r.harnessevolve.get('commit') or r.harnessevolve.get('version') or '?')[:7]})"
        for r in sorted(results, key=lambda r: r.cell_id)
    )
    resumed = sorted(r.cell_id for r in results if r.attempts > 1)
    last = f" (of {', '.join(resumed)}, resumed, only the last attempt)" if resumed else ""
    lines = [
        markdown(table),
        "",
        f"Cells (the commit each ran at): {cells}. Load average (1 min) at each cell's start: "
        f"{', '.join(shown) or 'not recorded'}; {sum(r.wall_s for r in results) / 3600:.1f} h of cells "
        f"in all{last}.",
        "",
        "Made by: " + "; ".join(f"`{c}`" for c in commands) if commands else "Made by: (not recorded)",
    ]
    return "\n".join(lines) + "\n"


def refresh(text: str) -> str:
    return BLOCK.sub(lambda m: m["open"] + table_text(ROOT / m["folder"]) + m["close"], text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", type=Path)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="fail when a block is stale")
    mode.add_argument("--write", action="store_true", help="rewrite the blocks")
    mode.add_argument("--smoke", action="store_true", help="--check, saying how many tables were checked")
    args = parser.parse_args(argv)
    args.check = args.check or args.smoke
    stale = []
    for path in args.files:
        text = path.read_text()
        fresh = refresh(text)
        if fresh != text:
            stale.append(str(path))
            if args.write:
                path.write_text(fresh)
    if stale and args.check:
        print(
            f"stale compare tables in {', '.join(stale)}: run {Path(__file__).name} --write", file=sys.stderr
        )
        return 1
    if args.smoke:
        count = sum(len(BLOCK.findall(path.read_text())) for path in args.files)
        print(f"{count} compare table(s) fresh in {len(args.files)} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
