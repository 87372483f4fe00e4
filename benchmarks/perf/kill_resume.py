"""Kill a run with SIGKILL at random moments, resume it each time, and print what was lost.

    .venv/bin/python benchmarks/perf/kill_resume.py [--kills 20] [--generations 6] [--seed 0]
        [--template shell-agent|python-agent]

A reference run goes uninterrupted on one copy of the seed harness. A second copy runs the same
command, is killed (``kill -9`` of its whole process group) at a random moment drawn uniformly
over the reference run's duration, then ``harnessevolve run --resume RUN`` is started -- and
killed again -- until ``--kills`` kills have landed; a last resume finishes the run. The agent is
scripted (deterministic, no network): a learner that solves a task family once the harness holds a
demonstration of it and gets confused beyond three, so the run has accepted and reverted edits.

Printed: where each kill landed (the last ledger event), then the comparison with the reference
run: accepted edits lost, extra or duplicate commits, final harness tree equal, ``git fsck``
clean, ledger lines unreadable. Target: nothing lost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BENCHMARK = "shell-basics"
_POLICY = None


def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted agent (``scripted/kill_resume:policy``), loaded inside each run process."""
    global _POLICY
    if _POLICY is None:
        from policies import FamilyLearner

        from harnessevolve.core.tasks import load_benchmark

        _POLICY = FamilyLearner(load_benchmark(BENCHMARK), max_examples=3)
    return _POLICY(messages, tools)


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT / "benchmarks" / "perf"), str(ROOT / "tests")])
    out.setdefault("GIT_AUTHOR_NAME", "kill-resume")
    out.setdefault("GIT_AUTHOR_EMAIL", "kill@resume.invalid")
    out.setdefault("GIT_COMMITTER_NAME", "kill-resume")
    out.setdefault("GIT_COMMITTER_EMAIL", "kill@resume.invalid")
    return out


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "harnessevolve.cli", *args]


def run_args(harness: Path, generations: int) -> list[str]:
    return cli(
        "run",
        "--harness",
        str(harness),
        "--benchmark",
        BENCHMARK,
        "-n",
        str(generations),
        "--batch-size",
        "8",
        "--model",
        "scripted/kill_resume:policy",
        "--json",
    )


TEMPLATE = "shell-agent"
"""The harness template (``--template``): ``python-agent`` runs the same loop through the command runner."""


def init(harness: Path) -> None:
    subprocess.run(
        cli("init", str(harness), "--template", TEMPLATE), check=True, env=env(), capture_output=True
    )


def run_dir(harness: Path) -> Path | None:
    runs = sorted((harness / ".harnessevolve" / "runs").glob("*"))
    return runs[-1] if runs else None


def ledger_events(harness: Path) -> tuple[list[dict[str, Any]], int]:
    """Events of the run, and how many non-empty lines could not be read."""
    folder = run_dir(harness)
    if folder is None or not (folder / "ledger.jsonl").exists():
        return [], 0
    events, bad = [], 0
    for line in (folder / "ledger.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            bad += 1
    return events, bad


def resumable(harness: Path) -> bool:
    events, _ = ledger_events(harness)
    return any(e.get("event") == "run_started" for e in events)


def git(harness: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=harness, capture_output=True, text=True, check=True).stdout


def commits(harness: Path) -> list[str]:
    return git(harness, "log", "--format=%H%x00%B%x01").split("\x01")


def summary_of(harness: Path) -> dict[str, Any]:
    events, bad = ledger_events(harness)
    blocks = [c.strip() for c in commits(harness) if c.strip()]
    keys = Counter()
    for block in blocks:
        _sha, _, message = block.partition("\x00")
        tags = dict(
            line.split(": ", 1) for line in message.splitlines() if ": " in line and line[:1].isupper()
        )
        if "Run" in tags and "Generation" in tags:
            kind = "revert" if "Reverts" in tags else "candidate"
            keys[(kind, tags["Generation"], tags.get("Candidate", "1"))] += 1
    accepted_msgs = [e.get("sha") for e in events if e.get("event") == "candidate_accepted"]
    accepted_subjects = [
        git(harness, "log", "-1", "--format=%s", sha).strip() for sha in accepted_msgs if sha
    ]
    fsck = subprocess.run(["git", "fsck", "--full", "--strict"], cwd=harness, capture_output=True, text=True)
    return {
        "tree": git(harness, "rev-parse", "HEAD^{tree}").strip(),
        "commits": len(blocks),
        "duplicates": sum(n - 1 for n in keys.values() if n > 1),
        "accepted": accepted_subjects,
        "finished": any(e.get("event") == "run_finished" for e in events),
        "fsck_ok": fsck.returncode == 0 and "error" not in (fsck.stdout + fsck.stderr).lower(),
        "bad_lines": bad,
        "resumed": sum(1 for e in events if e.get("event") == "run_resumed"),
        "recovered": [r for e in events if e.get("event") == "run_resumed" for r in e.get("recovered", [])],
        "dirty": bool(git(harness, "status", "--porcelain", "--untracked-files=all").strip()),
    }


def start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        args, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )


def clear_unstarted_run(harness: Path) -> None:
    """A run killed before its first ledger line left nothing to resume: remove its folder."""
    folder = run_dir(harness)
    if folder is None or resumable(harness):
        return
    for path in sorted(folder.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    folder.rmdir()


def episode(
    victim: Path, generations: int, duration: float, rng: random.Random, budget: int
) -> dict[str, Any]:
    """Run on ``victim`` until it finishes, killing each attempt at a random moment (uniform over
    ``duration``, the time a whole run takes) while kills remain in ``budget``; returns the kills,
    where they landed, any attempt that failed, and the time an unkilled fresh attempt took."""
    kills, landed, failures, full_run = 0, Counter(), [], None
    while True:
        events, _ = ledger_events(victim)
        if any(e.get("event") == "run_finished" for e in events):
            break
        clear_unstarted_run(victim)
        args = run_args(victim, generations)
        fresh = not resumable(victim)
        if not fresh:
            args += ["--resume", run_dir(victim).name]
        began = time.monotonic()
        proc = start(args)
        try:
            proc.wait(timeout=rng.uniform(0.0, duration) if kills < budget else None)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            kills += 1
            events, _ = ledger_events(victim)
            landed[events[-1]["event"] if events else "(before the ledger)"] += 1
            continue
        if fresh:
            full_run = time.monotonic() - began
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.returncode not in (0, 1):
            failures.append(f"exit {proc.returncode}: {' '.join(err.strip().splitlines()[-1:])}")
            break
    return {"kills": kills, "landed": landed, "failures": failures, "full_run": full_run}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs to land in all (default 20)")
    parser.add_argument("--generations", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--template", default=TEMPLATE, help="harness template (shell-agent, python-agent)")
    parser.add_argument("--smoke", action="store_true", help="1 kill in a 1-generation run: it runs")
    opts = parser.parse_args()
    if opts.smoke:
        opts.kills, opts.generations = 1, 1
    globals()["TEMPLATE"] = opts.template
    rng = random.Random(opts.seed)
    rows, landed, failures = [], Counter(), []
    with tempfile.TemporaryDirectory(prefix="he-kill-") as tmp:
        reference = Path(tmp) / "reference"
        init(reference)
        began = time.monotonic()
        done = subprocess.run(
            run_args(reference, opts.generations), env=env(), capture_output=True, text=True
        )
        duration = time.monotonic() - began
        if done.returncode not in (0, 1):
            print(done.stderr[-2000:])
            return 2
        ref = summary_of(reference)
        print(f"reference run: {duration:.1f} s, exit {done.returncode}, {len(ref['accepted'])} accepted")
        total = 0
        while total < opts.kills:
            victim = Path(tmp) / f"victim-{len(rows) + 1}"
            init(victim)
            result = episode(victim, opts.generations, duration, rng, opts.kills - total)
            total += result["kills"]
            landed.update(result["landed"])
            failures += result["failures"]
            rows.append({"kills": result["kills"], **summary_of(victim)})
            if result["full_run"]:
                duration = result["full_run"]  # the machine's load changed: kill within a real run's span
            if failures or len(rows) > 3 * opts.kills:
                break

    print(f"kills: {total} SIGKILLs to the whole process group, over {len(rows)} run(s)")
    print("where the kills landed (the last ledger event before the kill):")
    for event, n in landed.most_common():
        print(f"  {n:3d}  {event}")
    if failures:
        print(f"attempts that exited with an error: {len(failures)}: {failures[:3]}")
    recovered = Counter(line for row in rows for line in row["recovered"])
    if recovered:
        print("recovered on resume:")
        for line, n in recovered.most_common():
            print(f"  {n:3d}  {line}")
    print()
    header = f"{'run':>4s}{'kills':>6s}{'resumes':>8s}{'finished':>9s}{'accepted':>9s}{'lost':>5s}"
    header += f"{'commits':>8s}{'dup':>4s}{'fsck':>6s}{'torn':>5s}{'same tree':>10s}"
    print(header)
    print(
        f"{'ref':>4s}{0:>6d}{0:>8d}{ref['finished']!s:>9s}{len(ref['accepted']):>9d}{0:>5d}"
        f"{ref['commits']:>8d}{ref['duplicates']:>4d}{ref['fsck_ok']!s:>6s}{ref['bad_lines']:>5d}{'-':>10s}"
    )
    ok = not failures
    for i, row in enumerate(rows, 1):
        lost = [a for a in ref["accepted"] if a not in row["accepted"]]
        extra = [a for a in row["accepted"] if a not in ref["accepted"]]
        same = row["tree"] == ref["tree"]
        print(
            f"{i:>4d}{row['kills']:>6d}{row['resumed']:>8d}{row['finished']!s:>9s}{len(row['accepted']):>9d}"
            f"{len(lost):>5d}{row['commits']:>8d}{row['duplicates']:>4d}{row['fsck_ok']!s:>6s}"
            f"{row['bad_lines']:>5d}{same!s:>10s}"
        )
        ok = ok and row["finished"] and same and not lost and not extra and row["duplicates"] == 0
        ok = ok and row["fsck_ok"] and row["commits"] == ref["commits"] and not row["dirty"]
    print(
        "(torn: ledger lines a kill cut short; they are skipped on read and the next event starts a new line)"
    )
    print(
        "target (nothing lost, no duplicate commit, same final harness, fsck clean): "
        + ("met" if ok else "MISSED")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
