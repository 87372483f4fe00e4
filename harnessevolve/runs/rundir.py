"""A run's folder beside the harness (``DIR/.harnessevolve/runs/<run-id>/``) and the harness lock."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harnessevolve.core.errors import RunLockedError

STATE_DIR = ".harnessevolve"


def new_run_id() -> str:
    """``20261130-081829-123-7196``: UTC time to the millisecond, then a random tag; run ids sort in
    the order runs started (one run per harness at a time holds the lock)."""
    now = datetime.now(UTC)
    return now.strftime("%Y%m%d-%H%M%S-") + f"{now.microsecond // 1000:03d}-" + secrets.token_hex(2)


@dataclass(frozen=True)
class RunDir:
    root: Path

    @classmethod
    def create(cls, harness_dir: Path, run_id: str) -> RunDir:
        root = harness_dir / STATE_DIR / "runs" / run_id
        for sub in ("trajectories", "evaluations", "gates"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        return cls(root)

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.jsonl"


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one we may not signal counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class HarnessLock:
    """One run per harness: ``DIR/.harnessevolve/lock`` holds the owner's pid and run id."""

    def __init__(self, harness_dir: Path) -> None:
        self.path = harness_dir / STATE_DIR / "lock"
        self.stale_owner: dict | None = None

    def acquire(self, run_id: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = json.dumps(
            {"pid": os.getpid(), "run_id": run_id, "started": datetime.now(UTC).isoformat(timespec="seconds")}
        )
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = self._owner()
                if owner and pid_alive(int(owner.get("pid", -1))):
                    raise RunLockedError(
                        f"run {owner.get('run_id')} (pid {owner.get('pid')}) is running on this harness",
                        file=str(self.path),
                    ) from None
                self.stale_owner = owner
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as handle:
                handle.write(payload)
            return
        raise RunLockedError("could not take the harness lock", file=str(self.path))

    def _owner(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            return {}

    def release(self) -> None:
        owner = self._owner()
        if owner is not None and owner.get("pid") == os.getpid():
            self.path.unlink(missing_ok=True)
