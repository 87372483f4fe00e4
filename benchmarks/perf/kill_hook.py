"""``python -m kill_hook EVENT N ARGS...``: run ``harnessevolve ARGS`` and SIGKILL its whole process
group right after the ledger wrote its N-th ``EVENT`` (flushed and fsynced) -- the harshest moment
for that event, reproducible where a timer is not. ``EVENT`` ``mid-write`` kills instead in the
N-th atomic write of a harness file (not run state), after its temp file is written and before
the rename. Used by kill_at_events.py and its test."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
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


def install_mid_write(nth: int, harness: Path) -> None:
    from harnessevolve.core import files

    original = files.atomic_write_text
    seen = {"n": 0}
    root = harness.resolve()

    def atomic_write_text(path: Any, text: str, **options: Any) -> None:
        target = Path(path).resolve()
        if not target.is_relative_to(root) or ".harnessevolve" in target.relative_to(root).parts:
            return original(path, text, **options)  # scratch copies, run state: not the harness itself
        seen["n"] += 1
        if seen["n"] != nth:
            return original(path, text, **options)
        temp = Path(path).parent / f".{Path(path).name}.k1ll3d00.tmp"
        temp.write_text(text[: len(text) // 2], encoding="utf-8")  # half written, never renamed
        os.killpg(os.getpgid(0), signal.SIGKILL)

    files.atomic_write_text = atomic_write_text


def main() -> None:
    event, nth, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    if event == "mid-write":
        install_mid_write(nth, Path(args[args.index("--harness") + 1]))
    else:
        install(event, nth)
    from harnessevolve.cli.app import main as cli_main

    sys.argv = ["harnessevolve", *args]
    cli_main()


if __name__ == "__main__":
    main()
