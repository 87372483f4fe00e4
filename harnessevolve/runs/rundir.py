"""A run's folder beside the harness (``DIR/.harnessevolve/runs/<run-id>/``) and the harness lock."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from harnessevolve.core.errors import HarnessEvolveError, RunLockedError
from harnessevolve.runs.events import Event, RunFinished, RunStarted
from harnessevolve.runs.files import LOCK_VERSION
from harnessevolve.runs.ledger import read_ledger
from harnessevolve.runs.run_config import RunConfig
from harnessevolve.sandbox.limits import process_exists

STATE_DIR = ".harnessevolve"
LEDGER_FILE = "ledger.jsonl"


def new_run_id() -> str:
    """``20261130-081829-123-7196``: UTC time to the millisecond, then a random tag; run ids sort in
    the order runs started (one run per harness at a time holds the lock)."""
    now = datetime.now(UTC)
    return now.strftime("%Y%m%d-%H%M%S-") + f"{now.microsecond // 1000:03d}-" + secrets.token_hex(2)


E = TypeVar("E", bound=Event)


@dataclass(frozen=True)
class RunDir:
    """One run's folder: where it is, its ledger, its events and its recorded options; the one
    run-folder object (``find`` is the one lookup). ``load()`` keeps the events read once, for the
    many look-ups a report makes (``first``, ``last``, ``all``)."""

    root: Path
    snapshot: tuple[Event, ...] | None = field(default=None, compare=False, repr=False)
    """The events as read by ``load()``; None: every look-up reads the ledger afresh."""

    @classmethod
    def create(cls, harness_dir: Path, run_id: str) -> RunDir:
        root = runs_folder(harness_dir) / run_id
        for sub in ("trajectories", "evaluations", "gates"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        return cls(root)

    @classmethod
    def of(cls, harness_dir: Path) -> list[RunDir]:
        """The harness's runs that have a ledger, oldest first (run ids sort by start time)."""
        folder = runs_folder(harness_dir)
        if not folder.is_dir():
            return []
        return [cls(p) for p in sorted(folder.glob("*")) if (p / LEDGER_FILE).is_file()]

    @classmethod
    def find(cls, ref: str | None, harness_dir: Path, *, field: str | None = None) -> RunDir:
        """The run ``ref`` names: a run folder or its ledger, a run id, a unique id prefix, or
        (``None``) the harness's latest run; HarnessEvolveError says what matched instead (``field``:
        the option that named it, for the message)."""
        if ref:
            path = Path(ref)
            if path.is_file() and path.name == LEDGER_FILE:
                return cls(path.parent)
            if (path / LEDGER_FILE).is_file():
                return cls(path)
        return pick_run(
            cls.of(harness_dir),
            ref,
            runs_folder(harness_dir),
            field=field,
            hint="pass a run id, a run folder, or --harness DIR; start a run with `harnessevolve run`",
        )

    def load(self) -> RunDir:
        """This run with its events read once (``first``, ``last``, ``all`` and ``rollouts`` use them)."""
        return RunDir(self.root, tuple(self.events()))

    def recorded(self) -> tuple[Event, ...]:
        return self.snapshot if self.snapshot is not None else tuple(self.events())

    def first(self, kind: type[E]) -> E | None:
        return next((r for r in self.recorded() if isinstance(r, kind)), None)

    def last(self, kind: type[E]) -> E | None:
        return next((r for r in reversed(self.recorded()) if isinstance(r, kind)), None)

    def all(self, kind: type[E]) -> list[E]:
        return [r for r in self.recorded() if isinstance(r, kind)]

    @property
    def rollouts(self) -> int | None:
        """Every rollout the run used (run, cached, ``run_finished``); None before it finished."""
        finished = self.last(RunFinished)
        if finished is None or finished.rollouts is None:
            return None
        return finished.rollouts + (finished.cached_rollouts or 0)

    @classmethod
    def ending_at(cls, harness_dir: Path, sha: str) -> RunDir | None:
        """The latest finished run of this harness whose final revision is ``sha`` (what ``gate``
        matches its control to)."""
        for run in reversed(cls.of(harness_dir)):
            loaded = run.load()
            finished = loaded.last(RunFinished)
            if finished is not None and finished.rev == sha:
                return loaded
        return None

    @property
    def id(self) -> str:
        return self.root.name

    @property
    def ledger(self) -> Path:
        return self.root / LEDGER_FILE

    def exists(self) -> bool:
        """Whether the folder holds a ledger (a run was started in it)."""
        return self.ledger.is_file()

    def events(self) -> list[Event]:
        """The ledger's events, typed (``runs.ledger.read_ledger``)."""
        return read_ledger(self.ledger)

    def started(self, events: list[Event] | None = None) -> RunStarted | None:
        """The run's ``run_started`` record (from ``events`` when already read)."""
        return (
            next((e for e in events if isinstance(e, RunStarted)), None)
            if events is not None
            else (self.started(self.events()))
        )

    def options(self, events: list[Event] | None = None) -> dict[str, Any]:
        """The options ``run_started`` recorded (``{}`` when there is none)."""
        started = self.started(events)
        return dict(started.options) if started is not None else {}

    def config(self, events: list[Event] | None = None) -> RunConfig:
        """The options ``run_started`` recorded, typed (defaults where it recorded none)."""
        return RunConfig.from_json(self.options(events), where=f"{self.ledger}: run_started.options")

    def harness_dir(self, events: list[Event] | None = None) -> Path:
        """``<harness>/.harnessevolve/runs/<id>`` -> ``<harness>``; else what ``run_started`` says
        (a run folder moved away from its harness)."""
        beside = self.root.resolve().parent.parent.parent
        if (beside / "harness.yaml").is_file():
            return beside
        started = self.started(events) if events is None or events else None
        return Path(started.harness) if started is not None and started.harness else beside


def runs_folder(harness_dir: Path) -> Path:
    """Where a harness's runs live: ``DIR/.harnessevolve/runs``."""
    return Path(harness_dir) / STATE_DIR / "runs"


def pick_run(
    runs: list[RunDir], ref: str | None, folder: Path, *, hint: str, field: str | None = None
) -> RunDir:
    """The run of ``runs`` (oldest first, all in ``folder``) whose id is ``ref``, else the one it is
    a unique prefix of, or (``None``) the latest; HarnessEvolveError when several or none match
    (``hint``: what to do when none does)."""
    if ref:
        runs = [r for r in runs if r.id == ref] or [r for r in runs if r.id.startswith(ref)]
        if len(runs) > 1:
            raise HarnessEvolveError(
                f"run id prefix {ref!r} matches {len(runs)} runs",
                file=str(folder),
                field=field,
                hint="give more of the id: " + ", ".join(r.id for r in runs[:4]),
            )
    if not runs:
        known = [p.name for p in sorted(folder.glob("*"))] if ref and folder.is_dir() else []
        raise HarnessEvolveError(
            f"no run {ref!r} for this harness" if ref else "this harness has no runs yet",
            file=str(folder),
            field=field,
            hint=f"known runs: {', '.join(known[-3:])}" if known else hint,
        )
    return runs[-1]


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one we may not signal counts as alive)."""
    return pid > 0 and process_exists(pid)


class HarnessLock:
    """One run per harness: ``DIR/.harnessevolve/lock`` holds the owner's pid and run id.

    Taking it is atomic: the file is opened and ``flock``-ed (exclusive, non-blocking), and kept
    open for the run's life, so of two starters arriving together exactly one gets it, and a
    killed owner's lock is free again (the kernel drops a dead process's flock). The holder then
    checks that the path still names the file it locked (a releasing owner unlinks it) and reads
    the previous owner: a live pid there (a run of an older version, or this very process) still
    refuses; a dead or unreadable one is a stale lock, taken over and reported."""

    def __init__(self, harness_dir: Path) -> None:
        self.path = harness_dir / STATE_DIR / "lock"
        self.stale_owner: dict[str, Any] | None = None
        self._fd: int | None = None

    def acquire(self, run_id: str) -> None:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = json.dumps(
            {
                "version": LOCK_VERSION,
                "pid": os.getpid(),
                "run_id": run_id,
                "started": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        )
        for _ in range(20):
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise self._held(self._owner()) from None
            if not _same_file(fd, self.path):  # released (unlinked) between our open and flock
                os.close(fd)
                continue
            owner = _read_owner(fd)
            if owner and _owner_alive(owner):
                os.close(fd)
                raise self._held(owner)
            self.stale_owner = owner or None
            os.ftruncate(fd, 0)
            os.pwrite(fd, payload.encode(), 0)
            os.fsync(fd)
            self._fd = fd
            return
        raise RunLockedError("could not take the harness lock (it kept being replaced)", file=str(self.path))

    def _held(self, owner: dict[str, Any] | None) -> RunLockedError:
        owner = owner or {}
        return RunLockedError(
            f"run {owner.get('run_id', '?')} (pid {owner.get('pid', '?')}) is running on this harness",
            file=str(self.path),
        )

    def _owner(self) -> dict[str, Any] | None:
        try:
            owner = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return owner if isinstance(owner, dict) else {}

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            if _same_file(self._fd, self.path):
                self.path.unlink(missing_ok=True)  # while still holding the flock
        finally:
            os.close(self._fd)
            self._fd = None


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _read_owner(fd: int) -> dict[str, Any]:
    """The lock's previous content: ``{}`` when empty or unreadable (a torn write, junk)."""
    data = os.pread(fd, 65536, 0)
    try:
        owner = json.loads(data.decode("utf-8"))
    except ValueError:
        return {}
    return owner if isinstance(owner, dict) else {}


def _owner_alive(owner: dict[str, Any]) -> bool:
    pid = owner.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int | str):
        return False
    try:
        return pid_alive(int(pid))
    except ValueError:  # a non-numeric pid: nobody
        return False
