"""A check runner that runs on the host, unsandboxed: only for tests' positive controls, to show that
a probe would detect the hole the sandboxed runner closes. Never used by the package. And
``effect_task``: a task whose one check is an effect check, for the runners to run."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harnessevolve.core.tasks import Check, Task
from harnessevolve.evaluate.checkers import CommandRunner
from harnessevolve.sandbox.launch import Launch


class HostRunner(CommandRunner):
    """``CommandRunner`` running ``bash -c`` in the workspace on the host (what checks did before).
    ``legacy_env``: also the environment checks had before (HOME = the workspace, user site on)."""

    def __init__(self, *, legacy_env: bool = False) -> None:
        self.legacy_env = legacy_env

    @contextlib.contextmanager
    def process(
        self, command: str, workspace: Path, env: dict[str, str], read_only: tuple[str, ...], fresh: bool
    ) -> Iterator[Launch]:
        if self.legacy_env:
            env = {k: v for k, v in env.items() if k != "PYTHONNOUSERSITE"} | {"HOME": str(workspace)}
        yield Launch(("bash", "-c", command), env, workspace)

    @contextlib.contextmanager
    def scratch(self, prefix: str) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix=prefix) as folder:
            yield Path(folder)


def effect_task(task_id: str, instruction: str, command: str, setup_files: dict[str, str]) -> Task:
    """A train task on ``setup_files`` whose one check is the effect check of ``command``."""
    return Task(
        id=task_id,
        instruction=instruction,
        split="train",
        checks=(Check(type="effect", run=command),),
        setup_files=setup_files,
    )
