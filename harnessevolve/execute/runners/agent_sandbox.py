"""What an external agent sees inside the run's sandbox, besides its workspace.

With bubblewrap (the default), three things are bound in, besides the run's own read-only paths
(``--sandbox-ro``, benchmark.yaml ``sandbox_ro``), and nothing else of the host -- never the suite
folder, other tasks, references, checks, gold or answers (``sandbox/views.py``: the agent's view):

- ``/harness`` (read-only): a copy of the harness's files (never its ``.git`` or ``.harnessevolve``
  run state, which hold other rollouts and reference answers);
- ``/run/harnessevolve`` (read-only): the task file, the relay script and the model endpoint's unix
  socket; ``/run/harnessevolve/out`` inside it is writable, for the agent's ATIF file and answer;
- the Python environment harnessevolve runs in (read-only, at its own path), first on ``PATH``,
  with every benchmark folder and reference inside it masked (an installed wheel's built-in suites,
  BFCL's data with its ground truth).

The sandbox keeps ``--unshare-net``: its only network is its own loopback, where the in-sandbox
relay (``unix_relay.py``) forwards ``OPENAI_BASE_URL=http://127.0.0.1:<port>/v1`` to the socket.
So the one thing an agent can reach is its own rollout's endpoint. The ``none`` sandbox (``--unsafe-
no-sandbox``) runs the same agent on the host, with the same files at their host paths.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.core.errors import SandboxError
from harnessevolve.harness.agent_config import HARNESS_MOUNT
from harnessevolve.sandbox.base import Sandbox, agent_view
from harnessevolve.sandbox.bwrap import BwrapSandbox
from harnessevolve.sandbox.launch import ReadOnly
from harnessevolve.sandbox.python_paths import python_roots

CONTROL_MOUNT = "/run/harnessevolve"
SOCKET_NAME = "model.sock"
RELAY = Path(__file__).with_name("unix_relay.py")


@dataclass(frozen=True)
class AgentPaths:
    """Where the agent finds things, as paths inside its sandbox."""

    harness: str
    control: str

    @property
    def out(self) -> str:
        return f"{self.control}/out"

    @property
    def socket(self) -> str:
        return f"{self.control}/{SOCKET_NAME}"

    def inside(self, arg: str) -> str:
        """``arg`` of the agent's argv with ``/harness/...`` and ``/run/harnessevolve/...`` pointing
        where they are mounted (their host paths without a sandbox)."""
        for mount, here in ((HARNESS_MOUNT, self.harness), (CONTROL_MOUNT, self.control)):
            if arg == mount or arg.startswith(mount + "/"):
                return here + arg[len(mount) :]
        return arg


@dataclass(frozen=True)
class AgentBox:
    """The sandbox to launch the agent in, the paths it sees, and what to show it read-only."""

    sandbox: Sandbox
    paths: AgentPaths
    read_only: ReadOnly


def agent_sandbox(sandbox: Sandbox, harness_copy: Path, control: Path) -> AgentBox:
    """How to host an external agent in the run's ``sandbox``, as the agent sees it (``agent_view``:
    never the code-only paths -- the suite's Python, task files, references -- and every answer or
    suite folder masked, even inside the Python runtime); ``SandboxError`` when it cannot (docker,
    for now)."""
    if sandbox.name == "none":
        return AgentBox(sandbox, AgentPaths(str(harness_copy), str(control)), ())
    if not isinstance(sandbox, BwrapSandbox):
        raise SandboxError(
            f"the {sandbox.name!r} sandbox cannot run an external agent",
            hint="run command and mini-swe-agent harnesses with --sandbox bwrap",
        )
    view = sandbox.with_view(agent_view(sandbox).view)  # a copy of its own, the out folder writable
    view.writable = ((control / "out", Path(f"{CONTROL_MOUNT}/out")),)
    read_only = tuple((Path(root), Path(root)) for root in python_roots())
    read_only += ((harness_copy, Path(HARNESS_MOUNT)), (control, Path(CONTROL_MOUNT)))
    return AgentBox(view, AgentPaths(HARNESS_MOUNT, CONTROL_MOUNT), read_only)


def launcher(argv: list[str], paths: AgentPaths) -> str:
    """The ``bash -c`` script: start the relay, export its URL, then ``exec`` the agent."""
    python = shlex.quote(sys.executable)
    relay = shlex.quote(f"{paths.control}/{RELAY.name}")
    socket = shlex.quote(paths.socket)
    return (
        f"port=$({python} -I {relay} {socket}) || "
        "{ echo 'harnessevolve: model relay failed' >&2; exit 97; }\n"
        'export OPENAI_BASE_URL="http://127.0.0.1:$port/v1" OPENAI_API_BASE="http://127.0.0.1:$port/v1"\n'
        f"exec {shlex.join(argv)}\n"
    )
