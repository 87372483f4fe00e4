"""Checker commands in the agent's sandbox: where the execute and evaluate stages meet for checks.

An ``effect`` check runs the agent's submitted command (and the gold one, for a like-for-like
comparison) -- LLM-written text -- so the pipeline hands the checkers a runner that launches them
through the same sandbox as the agent's own commands. (``command`` checks are the benchmark
author's and still run on the host, in the workspace.)
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from harnessevolve.evaluate.checkers import BashRun, CommandRunner
from harnessevolve.execute.sandbox import Sandbox, resolve_sandbox
from harnessevolve.execute.sandbox_launch import kill_group


def sandboxed_runner(sandbox: Sandbox | None = None) -> CommandRunner:
    """A ``CommandRunner`` that runs each command through ``sandbox`` (default: the default one,
    resolved at the first command so that runs without effect checks never need it)."""

    def run(
        command: str, workspace: Path, env: dict[str, str], *, timeout_s: float, with_stderr: bool = True
    ) -> BashRun:
        chosen = resolve_sandbox(sandbox)
        with chosen.launch(command, workspace, env) as launch:
            proc = subprocess.Popen(
                list(launch.argv),
                cwd=launch.cwd,
                env=dict(launch.env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if with_stderr else subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                raw, _ = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                kill_group(proc.pid)
                proc.communicate()
                return BashRun(None, "")
            finally:
                kill_group(proc.pid)
                if launch.cleanup_argv:
                    subprocess.run(list(launch.cleanup_argv), capture_output=True, timeout=30, check=False)
        return BashRun(proc.returncode, raw.decode("utf-8", errors="replace"))

    return run
