"""What a sandbox shows of the host besides the workspace and system files: its ``SandboxView``.

Three audiences run in a rollout's sandbox, each trusted differently, and each gets its own view
of the same catalogue of host paths:

- ``Reach.AGENT``: the agent's own commands (``bash``, command tools, a ``command`` or
  ``mini-swe-agent`` program). It sees ``read_only`` (``--sandbox-ro``, benchmark.yaml
  ``sandbox_ro``) and nothing of ``code_only``; every ``private`` and ``suites`` path is masked
  (an empty folder, or ``/dev/null`` for a file) wherever something it is shown contains one;
- ``Reach.TOOLS``: a task's Python tools and MCP servers (the tool server). The benchmark's code,
  but driven by the agent's arguments: it sees ``read_only`` and ``code_only`` (the Python runtime,
  the tasks' ``python_path``), with ``private`` masked;
- ``Reach.CHECKS``: the checks, after the agent stopped. Everything, nothing masked.

``private`` holds what would hand the agent its answers: the suite's ``tasks/`` (answers, gold,
checks) and ``trajectories/`` (references), the check-only files (``Check.mounts``), the built-in
benchmarks and references shipped with the package. ``suites`` are whole benchmark folders (the
agent never needs one; the tool server may import code from one, so for it only ``private``
applies). A view only narrows (``narrowed``): a view made for the agent cannot become a check's.
"""

from __future__ import annotations

import functools
import os
import tempfile
from dataclasses import dataclass, replace
from enum import IntEnum
from pathlib import Path

from harnessevolve.core import paths
from harnessevolve.core.errors import SandboxError


class Reach(IntEnum):
    """Who a sandbox is for, from the least trusted up (a view narrows to the smaller reach)."""

    AGENT = 0
    TOOLS = 1
    CHECKS = 2


def _unique(paths: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for p in paths if p))


def inside_or_equal(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or lies below it (both absolute, compared as text)."""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/") or root == "/"


@dataclass(frozen=True)
class SandboxView:
    """The host paths a sandbox shows read-only, and those it hides (module docstring)."""

    read_only: tuple[str, ...] = ()
    """Shown to every audience."""
    code_only: tuple[str, ...] = ()
    """Shown to the tool server and the checks only: the Python runtime and ``python_path``."""
    private: tuple[str, ...] = ()
    """Masked for the agent and the tool server wherever a shown path contains them: answers."""
    suites: tuple[str, ...] = ()
    """Benchmark folders, masked for the agent wherever a shown path contains them."""
    reach: Reach = Reach.CHECKS

    def adding(
        self,
        *,
        read_only: tuple[str, ...] = (),
        code_only: tuple[str, ...] = (),
        private: tuple[str, ...] = (),
        suites: tuple[str, ...] = (),
    ) -> SandboxView:
        """This view with more paths (a path already shown read-only is not also code-only)."""
        shown = _unique(self.read_only + read_only)
        code = tuple(p for p in _unique(self.code_only + code_only) if p not in shown)
        return replace(
            self,
            read_only=shown,
            code_only=code,
            private=_unique(self.private + private),
            suites=_unique(self.suites + suites),
        )

    def narrowed(self, reach: Reach) -> SandboxView:
        """The same catalogue seen by ``reach`` (never wider than this view's own reach)."""
        return replace(self, reach=min(self.reach, reach))

    @property
    def shown(self) -> tuple[str, ...]:
        """The host paths bound read-only (at their own paths) for this view's reach."""
        if self.reach == Reach.AGENT:
            return self.read_only
        return _unique(self.read_only + self.code_only)

    @property
    def hidden(self) -> tuple[str, ...]:
        """The host paths masked for this view's reach (wherever a bound path contains them)."""
        if self.reach == Reach.CHECKS:
            return ()
        if self.reach == Reach.TOOLS:
            return self.private
        # A suite the benchmark itself shows (benchmark.yaml ``sandbox_ro: [.]``) stays shown; its
        # answers (``private``) never are.
        suites = tuple(s for s in self.suites if not any(inside_or_equal(p, s) for p in self.read_only))
        return _unique(self.private + suites)

    def masks(self, binds: list[tuple[str, str]]) -> list[tuple[str, bool]]:
        """Where to mask, inside the sandbox, for ``binds`` ((host source, path inside) pairs, in
        mount order): one (path inside, is a folder) per hidden path found below a source, the
        source itself included. Paths that do not exist on the host need no mask."""
        out: dict[str, bool] = {}
        for hidden in self.hidden:
            real = os.path.realpath(hidden)
            if not os.path.lexists(real):
                continue
            for source, target in binds:
                root = os.path.realpath(source)
                if inside_or_equal(real, root):
                    rest = real[len(root.rstrip("/")) :] if root != "/" else real
                    out[target.rstrip("/") + rest if rest else target] = os.path.isdir(real)
        return sorted(out.items())


def suite_private(root: Path) -> tuple[str, ...]:
    """What of benchmark folder ``root`` hands out answers: its ``tasks/`` and ``trajectories/``
    (the folders that exist)."""
    return tuple(str((root / name).resolve()) for name in ("tasks", "trajectories") if (root / name).exists())


def folder_private(folders: tuple[str, ...]) -> tuple[str, ...]:
    """``suite_private`` of each of ``folders`` that is a benchmark folder (holds benchmark.yaml):
    a ``python_path`` that is its suite's own folder (the default) shows its code, never its tasks."""
    out: list[str] = []
    for folder in folders:
        if (Path(folder) / "benchmark.yaml").is_file():
            out += suite_private(Path(folder))
    return tuple(out)


@functools.lru_cache(maxsize=4)
def _builtin(benchmarks: str, trajectories: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    private: list[str] = []
    root = Path(benchmarks)
    if root.is_dir():
        for suite in sorted(root.iterdir()):
            if suite.is_dir():
                private += suite_private(suite)
    if Path(trajectories).is_dir():
        private.append(str(Path(trajectories).resolve()))
    suites = (str(root.resolve()),) if root.is_dir() else ()
    return tuple(private), suites


def default_view() -> SandboxView:
    """The view every sandbox starts from: nothing shown; the built-in benchmarks' tasks and the
    built-in references private, their folder a suite (they ship inside the package of an installed
    wheel, which the Python runtime's mount would otherwise show)."""
    private, suites = _builtin(str(paths.builtin_dir("benchmarks")), str(paths.builtin_dir("trajectories")))
    return SandboxView(private=private, suites=suites)


def protected_folders(harness: Path | None = None, benchmark: Path | None = None) -> dict[str, str]:
    """What a read-only path must never be or hold, with why: the system temp folder (other jobs'
    workspaces, a checkout's answers), the harness (its history and run folders) and its run
    folder, the benchmark (every task's answer)."""
    found = {
        "/": "the whole host",
        tempfile.gettempdir(): "the temp folder, with every other rollout's workspace",
    }
    if harness is not None:
        found[str(harness)] = "the harness, with its git history and run folders"
        found[str(harness / ".harnessevolve")] = "the harness's run folders (other rollouts, references)"
    if benchmark is not None:
        found[str(benchmark)] = "the benchmark, with every task's answer"
    return {os.path.realpath(k): v for k, v in found.items()}


def refuse_read_only(paths: tuple[str, ...], protected: dict[str, str]) -> None:
    """``SandboxError`` (exit 2, naming why) when one of ``paths`` is ``/``, one of ``protected`` or
    a folder above one of them, or lies inside a run folder."""
    for path in paths:
        real = os.path.realpath(path)
        for folder, why in protected.items():
            if inside_or_equal(folder, real):
                what = "is" if real == folder else f"holds {folder},"
                raise SandboxError(
                    f"--sandbox-ro {path} {what} {why}: agents would read it",
                    field="--sandbox-ro",
                    hint="show only the folder the agent needs (a toolchain, a data set), not one above it",
                )
            if why.startswith("the harness's run") and inside_or_equal(real, folder):
                raise SandboxError(
                    f"--sandbox-ro {path} is inside {why}: agents would read it",
                    field="--sandbox-ro",
                    hint="show only the folder the agent needs",
                )
