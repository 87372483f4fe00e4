"""Run a repository's tests in the sandbox and read one outcome per test.

The tests run with the sandbox's ``python3`` through ``RUNNER``, a stdlib-only script that finds
the tests (``unittest`` discovery of ``test*.py``; pytest-style suites through pytest when the
sandbox's Python has it), runs them one by one and prints one JSON object per test after a marker
line. The same script, with a list of test ids, is the synthesized tasks' checker: it exits 0 only
when every listed test passes.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.execute.tools import run_shell
from harnessevolve.sandbox.base import Sandbox, resolve_sandbox

MARKER = "@@harnessevolve-test-results@@"
RUNNER_NAME = ".he_run_tests.py"

RUNNER = r'''"""harnessevolve's test runner: one outcome per test, as JSON lines after a marker.

python3 .he_run_tests.py [--ids FILE]: with --ids, runs only the listed tests and exits 0 only
when every one of them passes (exit 1 otherwise); without, runs every test and exits 0.
"""
import io, json, os, sys, traceback, unittest

MARKER = "@@harnessevolve-test-results@@"


def uses_pytest():
    for root, dirs, files in os.walk("."):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            if f.startswith("test") and f.endswith(".py"):
                with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                if "import pytest" in text and "unittest" not in text:
                    return True
    return False


def flat(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flat(t)
        else:
            yield t


def run_unittest(wanted):
    sys.path.insert(0, os.getcwd())
    suite = unittest.defaultTestLoader.discover(".", pattern="test*.py", top_level_dir=".")
    out = {}
    for test in flat(suite):
        tid = test.id()
        if wanted is not None and tid not in wanted:
            continue
        result = unittest.TestResult()
        sink = io.StringIO()
        old = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = sink
        try:
            test.run(result)
        finally:
            sys.stdout, sys.stderr = old
        bad = result.errors + result.failures
        if bad:
            out[tid] = {"status": "failed", "detail": bad[0][1][-3000:]}
        elif result.skipped:
            out[tid] = {"status": "skipped", "detail": ""}
        else:
            out[tid] = {"status": "passed", "detail": ""}
    return out


def run_pytest(wanted):
    import xml.etree.ElementTree as ET
    import pytest
    report = os.path.join(os.environ.get("TMPDIR", "/tmp"), "he-junit-%d.xml" % os.getpid())
    args = ["-q", "-p", "no:cacheprovider", "--junitxml", report]
    sink = io.StringIO()
    old = sys.stdout
    sys.stdout = sink
    try:
        pytest.main(args)
    finally:
        sys.stdout = old
    out = {}
    for tc in ET.parse(report).getroot().iter("testcase"):
        tid = tc.get("classname", "") + "::" + tc.get("name", "")
        if wanted is not None and tid not in wanted:
            continue
        bad = tc.find("failure")
        if bad is None:
            bad = tc.find("error")
        if bad is not None:
            text = (bad.get("message") or "") + "\n" + (bad.text or "")
            out[tid] = {"status": "failed", "detail": text[-3000:]}
        elif tc.find("skipped") is not None:
            out[tid] = {"status": "skipped", "detail": ""}
        else:
            out[tid] = {"status": "passed", "detail": ""}
    return out


def main():
    wanted = None
    if len(sys.argv) == 3 and sys.argv[1] == "--ids":
        with open(sys.argv[2], encoding="utf-8") as fh:
            wanted = set(line.strip() for line in fh if line.strip())
    try:
        out = run_pytest(wanted) if uses_pytest() else run_unittest(wanted)
    except BaseException:
        print(MARKER)
        detail = traceback.format_exc()[-3000:]
        print(json.dumps({"id": "<collection>", "status": "failed", "detail": detail}))
        sys.exit(1)
    print(MARKER)
    for tid in sorted(out):
        print(json.dumps({"id": tid, **out[tid]}))
    if wanted is not None:
        missing = wanted - set(out)
        for tid in sorted(missing):
            print(json.dumps({"id": tid, "status": "missing", "detail": "test not found"}))
        ok = not missing and all(v["status"] == "passed" for v in out.values())
        sys.exit(0 if ok else 1)


main()
'''


@dataclass(frozen=True)
class TestOutcome:
    status: str
    """``passed``, ``failed``, ``skipped`` or ``missing``."""
    detail: str = ""


@dataclass(frozen=True)
class SuiteRun:
    outcomes: dict[str, TestOutcome]
    timed_out: bool = False
    error: str = ""
    """Why no outcomes could be read (a hang, a crash of the runner), else empty."""

    def passing(self) -> frozenset[str]:
        return frozenset(t for t, o in self.outcomes.items() if o.status == "passed")

    def failing(self) -> frozenset[str]:
        return frozenset(t for t, o in self.outcomes.items() if o.status == "failed")


def parse_results(output: str) -> dict[str, TestOutcome]:
    """The per-test JSON lines after ``MARKER`` in the runner's output (lines that do not parse are
    skipped: the tests' own prints can only come before the marker)."""
    _, found, tail = output.rpartition(MARKER)
    if not found:
        return {}
    outcomes: dict[str, TestOutcome] = {}
    for line in tail.splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            outcomes[row["id"]] = TestOutcome(str(row.get("status", "")), str(row.get("detail", "")))
    return outcomes


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


async def run_suite(files: dict[str, str], *, timeout_s: float, sandbox: Sandbox | None = None) -> SuiteRun:
    """Lay ``files`` out in a fresh workspace, run every test there in the sandbox, read the outcomes."""
    workspace = Path(tempfile.mkdtemp(prefix="he-synth-"))
    try:
        write_tree(workspace, {**files, RUNNER_NAME: RUNNER})
        result = await run_shell(
            f"python3 -s {RUNNER_NAME}",
            workspace,
            timeout_s=timeout_s,
            limit=4_000_000,
            sandbox=resolve_sandbox(sandbox),
        )
    finally:
        await asyncio.to_thread(shutil.rmtree, workspace, True)
    outcomes = parse_results(result.output)
    if result.error == "timeout":
        return SuiteRun({}, timed_out=True, error=f"the tests did not finish within {timeout_s:g} s")
    if not outcomes:
        last = result.output.strip().splitlines()[-1:] or [""]
        return SuiteRun(
            {}, error=f"the test runner printed no results ({result.error or 'exit 0'}): {last[0][:200]}"
        )
    return SuiteRun(outcomes)
