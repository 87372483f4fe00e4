"""``python -m kill_hook EVENT N ARGS...``: run ``harnessevolve ARGS`` and SIGKILL its whole process
group right after the ledger wrote its N-th ``EVENT`` (flushed and fsynced) -- the harshest moment
for that event, reproducible where a timer is not. Used by kill_at_events.py and its test."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


def install(event: str, nth: int) -> None:
    from harnessevolve.runs import ledger

    original = ledger.Ledger.append
    seen = {"n": 0}

    def append(self: Any, record: Any, **data: Any) -> dict[str, Any]:
        written = original(self, record, **data)
        if written.get("event") == event:
            seen["n"] += 1
            if seen["n"] == nth:
                os.killpg(os.getpgid(0), signal.SIGKILL)
        return written

    ledger.Ledger.append = append  # type: ignore[method-assign]


def main() -> None:
    event, nth, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    install(event, nth)
    from harnessevolve.cli.app import main as cli_main

    sys.argv = ["harnessevolve", *args]
    cli_main()


if __name__ == "__main__":
    main()
