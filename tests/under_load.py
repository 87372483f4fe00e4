"""Run the test suite under artificial load: two busy processes per usable core spin for the whole
run, so every test sees a slow, contended machine (what CI and a shared box give). A test that
passes here only by luck of timing fails here; none should (tests wait on events, not clocks).

    make test-under-load                                    # the whole suite, 3 times in a row
    .venv/bin/python tests/under_load.py -- tests/cli/test_interrupt.py -x   # part of it, once
    .venv/bin/python tests/under_load.py --repeat 5 --per-core 3 -- -k budget

Arguments after ``--`` go to pytest. Exit status: the first failing pytest run's, else 0. The busy
processes die with this script (``PR_SET_PDEATHSIG``), even when it is killed with ``kill -9``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

SPIN = """
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the script
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)  # the script is already gone
while True:
    pass
"""


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def start_load(per_core: int) -> list[subprocess.Popen[bytes]]:
    count = per_core * usable_cores()
    return [
        subprocess.Popen([sys.executable, "-c", SPIN, str(os.getpid())], stdin=subprocess.DEVNULL)
        for _ in range(count)
    ]


def stop_load(busy: list[subprocess.Popen[bytes]]) -> None:
    for proc in busy:
        proc.kill()
    for proc in busy:
        proc.wait()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--per-core", type=int, default=2, help="busy processes per usable core (2)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="pytest runs in a row; stops at the first failure"
    )
    split = argv.index("--") if "--" in argv else len(argv)
    options, pytest_args = parser.parse_args(argv[:split]), argv[split + 1 :]
    busy = start_load(options.per_core)
    print(f"under load: {len(busy)} busy processes on {usable_cores()} core(s)", flush=True)
    try:
        for attempt in range(1, options.repeat + 1):
            print(f"under load: pytest run {attempt} of {options.repeat}", flush=True)
            started = time.monotonic()
            code = subprocess.call([sys.executable, "-m", "pytest", "-q", *pytest_args])
            minutes = (time.monotonic() - started) / 60
            if code != 0:
                print(
                    f"under load: pytest run {attempt} failed (exit {code}) after {minutes:.1f} min",
                    flush=True,
                )
                return code
            print(f"under load: pytest run {attempt} passed in {minutes:.1f} min", flush=True)
    finally:
        stop_load(busy)
    print(f"under load: {options.repeat} pytest run(s) in a row passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
