"""Checker commands in the agent's sandbox: where the execute and evaluate stages meet for checks.

An ``effect`` check runs the agent's submitted command (and the gold one, for a like-for-like
comparison) -- LLM-written text -- so the pipeline hands the checkers a runner that launches them
through the same sandbox as the agent's own commands. (``command`` checks are the benchmark
author's and still run on the host, in the workspace.)
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from harnessevolve.evaluate.checkers import BashRun, CommandRunner, run_process
from harnessevolve.execute.sandbox import Sandbox, resolve_sandbox


def sandboxed_runner(sandbox: Sandbox | None = None) -> CommandRunner:
    """A ``CommandRunner`` that runs each command through ``sandbox`` (default: the default one,
    resolved at the first command so that runs without effect checks never need it)."""

    def run(
        command: str, workspace: Path, env: dict[str, str], *, timeout_s: float, with_stderr: bool = True
    ) -> BashRun:
        chosen = resolve_sandbox(sandbox)
        with chosen.launch(command, workspace, env) as launch:
            try:
                return run_process(
                    list(launch.argv),
                    launch.cwd,
                    dict(launch.env),
                    timeout_s=timeout_s,
                    with_stderr=with_stderr,
                )
            finally:
                if launch.cleanup_argv:
                    subprocess.run(list(launch.cleanup_argv), capture_output=True, timeout=30, check=False)

    return run
