"""A check runner that runs on the host, unsandboxed: only for tests' positive controls, to show that
a probe would detect the hole the sandboxed runner closes. Never used by the package."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harnessevolve.evaluate.checkers import BashRun, run_process


class HostRunner:
    """``CommandRunner`` running ``bash -c`` in the workspace on the host (what checks did before).
    ``legacy_env``: also the environment checks had before (HOME = the workspace, user site on)."""

    def __init__(self, *, legacy_env: bool = False) -> None:
        self.legacy_env = legacy_env

    def __call__(
        self,
        command: str,
        workspace: Path,
        env: dict[str, str],
        *,
        timeout_s: float,
        with_stderr: bool = True,
        read_only: tuple[str, ...] = (),
        fresh: bool = False,
    ) -> BashRun:
        if self.legacy_env:
            env = {k: v for k, v in env.items() if k != "PYTHONNOUSERSITE"} | {"HOME": str(workspace)}
        return run_process(
            ["bash", "-c", command], workspace, env, timeout_s=timeout_s, with_stderr=with_stderr
        )

    @contextlib.contextmanager
    def scratch(self, prefix: str) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix=prefix) as folder:
            yield Path(folder)
