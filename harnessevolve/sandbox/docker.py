"""A sandbox in a throwaway Docker container, used only when a Docker engine answers.

The container has no network, a read-only root, no capabilities, no new privileges, a private
/tmp, the workspace bound at its own path, and ``SandboxLimits`` as Docker limits (memory,
process count, CPU time and file size ulimits; they bound each command's container, not the
rollout as a whole). It is removed after the command, also when the
command was killed (killing the ``docker run`` client does not stop a container).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

from harnessevolve.core.errors import SandboxError
from harnessevolve.sandbox.launch import (
    Launch,
    ReadOnly,
    SandboxLimits,
    claim_workspace,
)
from harnessevolve.sandbox.views import SandboxView, default_view

DEFAULT_IMAGE = "python:3.12-slim"
DOCKER_CLIENT_KEYS = (
    "PATH",
    "HOME",
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "XDG_RUNTIME_DIR",
)
DOCKER_HINT = "start a Docker engine (`docker info` must succeed), or use --sandbox bwrap"


class DockerSandbox:
    name = "docker"

    def __init__(
        self, limits: SandboxLimits | None = None, *, image: str = DEFAULT_IMAGE, docker: str = "docker"
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.image = image
        self.docker = docker
        self.view = default_view()

    def with_view(self, view: SandboxView) -> DockerSandbox:
        """A copy showing ``view`` (volumes read-only, hidden paths masked by empty tmpfs mounts)."""
        derived = copy.copy(self)
        derived.view = view
        return derived

    def view_args(self, read_only: ReadOnly) -> list[str]:
        """``--volume``/``--tmpfs`` options for ``view`` and the launch's ``read_only`` pairs."""
        binds = [(p, p) for p in self.view.shown] + [(str(s), str(t)) for s, t in read_only]
        args = [arg for source, target in binds for arg in ("--volume", f"{source}:{target}:ro")]
        for target, is_dir in self.view.masks(binds):
            args += ["--tmpfs", f"{target}:ro,size=4k"] if is_dir else ["--volume", f"/dev/null:{target}:ro"]
        return args

    def argv(
        self,
        command: str,
        workspace: Path,
        env: Mapping[str, str],
        container: str,
        uid: int | None = None,
        read_only: ReadOnly = (),
    ) -> tuple[str, ...]:
        """The ``docker run`` command line; the container runs as ``uid`` (None: as we do)."""
        limits = self.limits
        mib = 1024 * 1024
        user = (uid, uid) if uid is not None else (os.getuid(), os.getgid())
        env_args = [arg for key in sorted(env) for arg in ("--env", f"{key}={env[key]}")]
        return (
            shutil.which(self.docker) or self.docker,
            "run",
            "--rm",
            "--name",
            container,
            "--network",
            "none",
            "--read-only",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--user",
            f"{user[0]}:{user[1]}",
            "--pids-limit",
            str(limits.max_processes),
            "--memory",
            f"{limits.memory_mb}m",
            "--memory-swap",
            f"{limits.memory_mb}m",
            "--ulimit",
            f"cpu={limits.cpu_s}:{limits.cpu_s}",
            "--ulimit",
            f"fsize={limits.max_file_mb * mib}:{limits.max_file_mb * mib}",
            "--ulimit",
            "core=0:0",
            "--tmpfs",
            "/tmp:rw,size=256m",
            "--volume",
            f"{workspace}:{workspace}:rw",
            *self.view_args(read_only),
            "--workdir",
            str(workspace),
            *env_args,
            self.image,
            "bash",
            "-c",
            command,
        )

    @contextlib.contextmanager
    def launch(
        self, command: str, workspace: Path, env: Mapping[str, str], *, read_only: ReadOnly = ()
    ) -> Iterator[Launch]:
        self.check()
        workspace, uid = claim_workspace(workspace)
        container = f"harnessevolve-{uuid.uuid4().hex[:12]}"
        yield Launch(
            self.argv(command, workspace, env, container, uid, read_only),
            docker_client_env(),
            Path("/"),
            cleanup_argv=(shutil.which(self.docker) or self.docker, "rm", "--force", container),
        )

    def check(self) -> None:
        problem = probe_docker(self.docker)
        if problem:
            raise SandboxError(problem, hint=DOCKER_HINT)


def docker_client_env() -> dict[str, str]:
    """What the ``docker`` client itself needs from our environment (never the command's env)."""
    return {k: v for k, v in os.environ.items() if k in DOCKER_CLIENT_KEYS}


@functools.lru_cache(maxsize=4)
def probe_docker(docker: str = "docker") -> str | None:
    """None when a Docker engine answers ``docker info``; otherwise why not."""
    path = shutil.which(docker)
    if not path:
        return "docker is not installed (no `docker` on PATH)"
    try:
        proc = subprocess.run(
            [path, "info", "--format", "{{.ServerVersion}}"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"docker cannot run: {exc}"
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        return (
            f"no Docker engine answers `docker info` ({detail[-1] if detail else f'exit {proc.returncode}'})"
        )
    return None
