"""Kill a run with SIGKILL right after each kind of ledger event, resume it, compare with a run
that was never killed.

    .venv/bin/python benchmarks/perf/kill_at_events.py [--generations 4] [--events a,b,...]

A reference run goes uninterrupted. Then, for every event type its ledger holds (``run_finished``
aside: after it there is nothing to resume), a fresh copy of the seed harness runs the same
command under ``kill_hook``, which SIGKILLs the whole process group right after that event's first
line is flushed and fsynced (and once inside the first atomic write of a candidate file into the
harness: its temp file half written, never renamed); ``harnessevolve run --resume RUN`` then
finishes the run (plain, not hooked). The agent is scripted (deterministic, no network), as in kill_resume.py.

Each row must show: the kill landed, the resume finished the run with no hand repair, the final
harness tree and the number of commits equal the reference's, no duplicate commit, ``git fsck``
clean, the tree clean (no temp files left), no ``he-*`` folders left in ``$TMPDIR``, the spend in
``run_finished`` counting at least the reference's model calls (what was spent before the kill
is not forgotten; a resumed run may spend more, redoing what no cache held), and every
generation's row complete (commit, verdicts, outcome) in the ledger.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kill_resume import env, init, ledger_events, run_args, run_dir, summary_of  # noqa: E402

SKIPPED = {"run_finished"}


def run_env(tmpdir: Path) -> dict[str, str]:
    out = env()
    out["TMPDIR"] = str(tmpdir)
    return out


def hooked(event: str, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "kill_hook", event, "1", *args[3:]]  # args: python -m harnessevolve.cli ...


def finished_usage(harness: Path) -> dict[str, Any]:
    events, _ = ledger_events(harness)
    done = [e for e in events if e.get("event") == "run_finished"]
    return (done[-1].get("usage") or {}) if done else {}


def total_calls(usage: dict[str, Any]) -> int:
    """Model calls the run's spend records (tokens per call vary with the workspace path's length
    in a prompt, so calls are what a killed run must not forget)."""
    return int((usage.get("totals") or {}).get("calls", 0))


ROW_FIELDS = ("candidate", "verdicts", "outcome", "summary", "validation", "train_current", "train_candidate")


def row_shape(harness: Path) -> dict[int, tuple[str, ...]]:
    """Per generation, which fields of its ``generation_finished`` row are filled (the values differ
    between runs: commit shas carry the run id)."""
    events, _ = ledger_events(harness)
    rows = {e["generation"]: e for e in events if e.get("event") == "generation_finished"}
    return {g: tuple(f for f in ROW_FIELDS if e.get(f) not in (None, "", "-", {})) for g, e in rows.items()}


def one_kill(root: Path, event: str, generations: int) -> dict[str, Any]:
    victim = root / f"victim-{event}"
    tmpdir = root / f"tmp-{event}"
    tmpdir.mkdir()
    init(victim)
    args = run_args(victim, generations)
    first = subprocess.run(
        hooked(event, args), env=run_env(tmpdir), capture_output=True, text=True, start_new_session=True
    )
    killed = first.returncode == -9
    attempts, last = 0, first
    while attempts < 3:
        events, _ = ledger_events(victim)
        if any(e.get("event") == "run_finished" for e in events):
            break
        folder = run_dir(victim)
        resume = [*args, "--resume", folder.name] if folder else args
        last = subprocess.run(resume, env=run_env(tmpdir), capture_output=True, text=True)
        attempts += 1
    summary = summary_of(victim)
    leftovers = sorted(p.name for p in tmpdir.iterdir() if p.name.startswith("he-"))
    return {
        "event": event,
        "killed": killed,
        "resumes": attempts,
        "error": "" if summary["finished"] else (last.stderr.strip().splitlines() or ["?"])[-1][:160],
        "calls": total_calls(finished_usage(victim)),
        "leftovers": leftovers,
        "rows": row_shape(victim),
        **summary,
    }


def compare(ref: dict[str, Any], row: dict[str, Any], ref_calls: int) -> list[str]:
    problems = []
    lacking = {
        g: sorted(set(fields) - set(row["rows"].get(g, ())))
        for g, fields in ref["rows"].items()
        if set(fields) - set(row["rows"].get(g, ()))
    }
    checks = [
        (row["killed"], "the kill did not land"),
        (row["finished"], f"not finished: {row['error']}"),
        (row["tree"] == ref["tree"], "final tree differs"),
        (row["commits"] == ref["commits"], f"{row['commits']} commits, reference {ref['commits']}"),
        (row["duplicates"] == 0, f"{row['duplicates']} duplicate commits"),
        (row["fsck_ok"], "git fsck not clean"),
        (not row["dirty"], "tree left dirty (temp files?)"),
        (not row["leftovers"], f"left in $TMPDIR: {row['leftovers'][:3]}"),
        (row["calls"] >= ref_calls, f"spend records {row['calls']} model calls < reference {ref_calls}"),
        (not lacking, f"generation rows lack {lacking}"),
    ]
    for ok, why in checks:
        if not ok:
            problems.append(why)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--events", default="", help="comma-separated event types (default: all the run has)")
    parser.add_argument("--smoke", action="store_true", help="1 generation, killed after run_started only")
    opts = parser.parse_args(argv)
    if opts.smoke:
        opts.generations, opts.events = 1, "run_started"
    with tempfile.TemporaryDirectory(prefix="kill-events-") as tmp:
        root = Path(tmp)
        reference = root / "reference"
        (root / "tmp-reference").mkdir()
        init(reference)
        done = subprocess.run(
            run_args(reference, opts.generations),
            env=run_env(root / "tmp-reference"),
            capture_output=True,
            text=True,
        )
        if done.returncode not in (0, 1):
            print(done.stderr[-2000:])
            return 2
        ref = {**summary_of(reference), "rows": row_shape(reference)}
        ref_calls = total_calls(finished_usage(reference))
        events, _ = ledger_events(reference)
        kinds = list(dict.fromkeys(e["event"] for e in events if e["event"] not in SKIPPED))
        kinds.append("mid-write")  # inside the first write of a candidate's file, before its rename
        if opts.events:
            kinds = [k for k in opts.events.split(",") if k]
        print(
            f"reference: {ref['commits']} commits, {len(ref['accepted'])} accepted, {ref_calls} model calls"
        )
        print(f"{'killed right after':<22s}{'resumes':>8s}{'calls':>7s}  result")
        failed = 0
        for kind in kinds:
            row = one_kill(root, kind, opts.generations)
            problems = compare(ref, row, ref_calls)
            failed += bool(problems)
            verdict = "same tree, same commits, clean" if not problems else "; ".join(problems)
            print(f"{kind:<22s}{row['resumes']:>8d}{row['calls']:>7d}  {verdict}", flush=True)
        print(f"{len(kinds) - failed} of {len(kinds)} event types: resumed to the reference's result")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
