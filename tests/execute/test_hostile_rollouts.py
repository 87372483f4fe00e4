"""Hostile agents through the real agent loop (``run_agent``, scripted model, default sandbox): FIFOs
for the file tools, and floods of memory, processes, disk and inodes against the whole-rollout
limits. Each hit must end as a clear tool error in the trajectory, the run going on (the agent's
next call still runs); each has a positive control showing the probe would see the hole if the
limit were not there.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harnessevolve.core import paths
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.tasks import Check, Task
from harnessevolve.execute import workspace as workspace_module
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.load import load_harness
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.sandbox import launch as sandbox_launch
from harnessevolve.sandbox.base import BwrapSandbox, SandboxLimits
from harnessevolve.sandbox.launch import workspace_cgroup
from harnessevolve.sandbox.limits import cgroup_mode

pytestmark = pytest.mark.skipif(
    not os.access("/usr/bin/bwrap", os.X_OK), reason="/usr/bin/bwrap is not installed (make install does)"
)

TASK = Task(id="hostile", instruction="Do it.", split="train", checks=(Check(type="answer", expected="x"),))
AS_ROOT = os.geteuid() == 0
needs_cgroup = pytest.mark.skipif(cgroup_mode() == "none", reason="no cgroup for rollouts on this machine")
needs_root = pytest.mark.skipif(not AS_ROOT, reason="the workspace is a tmpfs of its own only as root")


def calls(*tool_calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Scripted replies: each tool call in turn, then submit."""
    replies = [{"tool_calls": [{"name": name, "arguments": args}]} for name, args in tool_calls]
    return replies + [{"tool_calls": [{"name": "submit", "arguments": {"answer": "x"}}]}]


@pytest.fixture
def script() -> Iterator[str]:
    name = f"hostile-rollout-{uuid.uuid4().hex[:8]}"
    yield name
    unregister_script(name)


def rollout(
    name: str, replies: list[dict[str, Any]], sandbox: BwrapSandbox, *, keep: list[float] | None = None
) -> tuple[Trajectory, float]:
    """Run the agent loop; the trajectory, and the wall time. ``keep`` gets the rollout cgroup's
    peak memory in MiB, read before the workspace is removed."""
    register_script(name, replies)
    harness = load_harness(paths.builtin_dir("harnesses") / "shell-agent")

    async def go() -> tuple[Trajectory, float]:
        workspace = await create_workspace(TASK, sandbox=sandbox)
        try:
            started = time.monotonic()
            trajectory = await run_agent(
                harness, TASK, workspace, model=f"scripted/{name}", seed=0, sandbox=sandbox
            )
            took = time.monotonic() - started
            cgroup = workspace_cgroup(workspace)
            if keep is not None and cgroup is not None:
                keep.append(cgroup.peak_mb() or 0.0)
            return trajectory, took
        finally:
            remove_workspace(workspace)

    return asyncio.run(go())


def observations(trajectory: Trajectory) -> list[str]:
    return [o.content for s in trajectory.agent_steps for o in s.observations]


def bash_output(name: str, command: str, sandbox: BwrapSandbox) -> str:
    """What ``command``, the one bash call of a rollout, printed."""
    trajectory, _ = rollout(name, calls(("bash", {"command": command})), sandbox)
    return observations(trajectory)[0]


def submitted(trajectory: Trajectory) -> bool:
    return trajectory.extra.get("answer") == "x"


def flood_then(
    name: str, flood: str, then: str, sandbox: BwrapSandbox, *, keep: list[float] | None = None
) -> tuple[str, str, bool]:
    """A rollout of two bash calls, ``flood`` then ``then``: what each printed, and whether the
    rollout went on to submit (``keep`` as for ``rollout``)."""
    replies = calls(("bash", {"command": flood}), ("bash", {"command": then}))
    trajectory, _ = rollout(name, replies, sandbox, keep=keep)
    flood_output, then_output = observations(trajectory)[:2]
    return flood_output, then_output, submitted(trajectory)


@pytest.fixture
def without_rollout_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Positive control: rollouts get no cgroup of their own."""
    monkeypatch.setattr(sandbox_launch, "make_rollout_cgroup", lambda *a, **k: None)


@pytest.fixture
def without_workspace_tmpfs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Positive control: the workspace is not a tmpfs of its own."""
    monkeypatch.setattr(workspace_module, "mount_workspace", lambda *a, **k: False)


# --- FIFOs for the file tools -------------------------------------------------------------------


COMMAND_TIMEOUT_S = 20.0
"""The shell-agent harness's ``command_timeout_s``: the FIFO rollout must end well within it."""


def test_file_tools_on_fifos_end_within_the_command_timeout_with_a_tool_error(script: str) -> None:
    """mkfifo, then read_file and write_file on FIFOs (in the workspace and in a folder):
    each is refused at once, the rollout submits, and all of it ends within the command timeout
    (it runs in a thread, so a blocking file tool fails the test instead of hanging it)."""
    replies = calls(
        ("bash", {"command": "mkfifo pipe && mkdir d && mkfifo d/inner && echo made"}),
        ("read_file", {"path": "pipe"}),
        ("write_file", {"path": "pipe", "content": "x"}),
        ("write_file", {"path": "d/inner", "content": "x"}),
    )
    result: list[tuple[Trajectory, float]] = []
    thread = threading.Thread(
        target=lambda: result.append(rollout(script, replies, BwrapSandbox())), daemon=True
    )
    started = time.monotonic()
    thread.start()
    thread.join(COMMAND_TIMEOUT_S)
    assert result, f"the rollout did not end within the command timeout ({time.monotonic() - started:.1f}s)"
    trajectory, took = result[0]
    seen = observations(trajectory)
    assert seen[0].strip() == "made"
    assert all("not a regular file" in o for o in seen[1:4]), seen
    assert [s.extra.get("error") for s in trajectory.agent_steps[1:4]] == ["tool_error: PermissionError"] * 3
    assert submitted(trajectory) and took < COMMAND_TIMEOUT_S, took


@pytest.mark.parametrize("mode", ["read", "write"])
def test_positive_control_opening_a_fifo_the_ordinary_way_blocks(tmp_path: Path, mode: str) -> None:
    """What read_file/write_file did before (``Path.read_text``/``write_text``): on a FIFO with no
    other end they never return (the thread is let go afterwards by opening the other end)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = threading.Event()
    blocking = (lambda: fifo.read_text()) if mode == "read" else (lambda: fifo.write_text("x"))
    thread = threading.Thread(target=lambda: (blocking(), done.set()), daemon=True)
    thread.start()
    assert not done.wait(1.0), "the ordinary open did not block: the FIFO probe would see nothing"
    other_end = os.open(fifo, (os.O_WRONLY if mode == "read" else os.O_RDONLY) | os.O_NONBLOCK)
    if mode == "write":
        os.read(other_end, 10) if done.wait(0) else None
    thread.join(5)
    os.close(other_end)


# --- memory across all of a rollout's processes --------------------------------------------------

MEMORY_FLOOD = (
    "for i in 1 2 3 4; do python3 -c 'import time; x = bytearray(200 * 1024**2); x[::4096] = "
    'b"y" * len(x[::4096]); print("held", flush=True); time.sleep(4)\' & done; wait; echo flood over'
)
"""Four processes of 200 MiB each (800 MiB), every one within the 1 GiB per-process limit."""


@needs_cgroup
def test_a_multi_process_memory_flood_is_stopped_at_the_rollout_limit(script: str) -> None:
    sandbox = BwrapSandbox(SandboxLimits(rollout_memory_mb=300))
    peak: list[float] = []
    flood, after, went_on = flood_then(script, MEMORY_FLOOD, "echo alive", sandbox, keep=peak)
    assert "rollout_memory_mb=300" in flood and "Killed" in flood, flood  # by the kernel, in the rollout
    assert after.strip() == "alive" and went_on  # the run goes on
    assert peak and peak[0] <= 300.5, peak


@needs_cgroup
@pytest.mark.usefixtures("without_rollout_cgroup")
def test_positive_control_without_the_rollout_cgroup_the_flood_holds_it_all(script: str) -> None:
    sandbox = BwrapSandbox(SandboxLimits(rollout_memory_mb=300))
    flood = bash_output(script, MEMORY_FLOOD, sandbox)
    assert flood.count("held") == 4 and "Killed" not in flood, flood  # 800 MiB held at once
    assert "rollout limit" not in flood


# --- processes across a rollout -------------------------------------------------------------------

PROCESS_FLOOD = "for i in $(seq 1 120); do sleep 3 & done; echo started"


@needs_cgroup
def test_a_process_flood_is_stopped_at_the_rollout_limit(script: str) -> None:
    sandbox = BwrapSandbox(SandboxLimits(rollout_processes=40, max_processes=1000))
    flood, after, went_on = flood_then(script, PROCESS_FLOOD, "echo alive", sandbox)
    assert "rollout_processes=40" in flood and "fork" in flood, flood
    assert after.strip() == "alive" and went_on


@needs_cgroup
@pytest.mark.usefixtures("without_rollout_cgroup")
def test_positive_control_without_the_rollout_cgroup_all_processes_start(script: str) -> None:
    sandbox = BwrapSandbox(SandboxLimits(rollout_processes=40, max_processes=1000))
    flood = bash_output(script, PROCESS_FLOOD, sandbox)
    assert "fork" not in flood and flood.strip() == "started", flood


# --- total disk and inodes of the workspace ---------------------------------------------------------

DISK_FLOOD = (
    "for i in 1 2 3; do head -c 20M /dev/zero > big$i || echo write $i failed; done; "
    "echo size=$(du -sm . | cut -f1)"
)
INODE_FLOOD = "for i in $(seq 1 1500); do : > f$i || { echo stopped at $i; break; }; done; ls | wc -l"


@needs_root
def test_a_disk_flood_is_stopped_at_the_workspace_size(script: str) -> None:
    sandbox = BwrapSandbox(SandboxLimits(workspace_mb=32))
    flood, after, went_on = flood_then(script, DISK_FLOOD, "rm big*; echo freed", sandbox)
    assert "No space left on device" in flood and "workspace_mb=32" in flood, flood
    assert "write 2 failed" in flood and int(flood.split("size=")[1].split()[0]) <= 32
    assert after.strip() == "freed" and went_on


@needs_root
@pytest.mark.usefixtures("without_workspace_tmpfs")
def test_positive_control_without_the_workspace_tmpfs_the_disk_flood_goes_past_it(script: str) -> None:
    sandbox = BwrapSandbox(SandboxLimits(workspace_mb=32))
    flood = bash_output(script, DISK_FLOOD, sandbox)
    assert "failed" not in flood and int(flood.split("size=")[1].split()[0]) >= 60, flood  # in "32 MiB"


@needs_root
def test_an_inode_flood_is_stopped_at_the_workspace_file_count(script: str) -> None:
    sandbox = BwrapSandbox(SandboxLimits(workspace_files=500))
    flood, after, went_on = flood_then(script, INODE_FLOOD, "echo alive", sandbox)
    assert "stopped at" in flood and "workspace_files=500" in flood, flood
    assert int(flood.split("stopped at")[1].split()[0]) <= 500
    assert after.strip() == "alive" and went_on


@needs_root
@pytest.mark.usefixtures("without_workspace_tmpfs")
def test_positive_control_without_the_workspace_tmpfs_every_file_is_made(script: str) -> None:
    sandbox = BwrapSandbox(SandboxLimits(workspace_files=500))
    assert bash_output(script, INODE_FLOOD, sandbox).strip() == "1500"


@pytest.mark.parametrize(
    ("tool", "path"),
    [
        ("read_file", "to-fifo"),
        ("write_file", "to-fifo"),
        ("read_file", "zero"),
        ("write_file", "null"),
        ("read_file", "out/x"),
        ("write_file", "out/new.txt"),
    ],
)
def test_file_tools_refuse_links_to_fifos_devices_and_outside(tmp_path: Path, tool: str, path: str) -> None:
    from harnessevolve.execute.tools import run_tool
    from harnessevolve.harness.model import ToolSpec

    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.mkfifo(workspace / "pipe")
    (workspace / "to-fifo").symlink_to("pipe")
    (workspace / "zero").symlink_to("/dev/zero")
    (workspace / "null").symlink_to("/dev/null")
    (workspace / "out").symlink_to(tmp_path)
    spec = ToolSpec(tool, tool, {"type": "object", "required": ["path"]}, builtin=tool)
    started = time.monotonic()
    result = asyncio.run(run_tool(spec, {"path": path, "content": "x"}, workspace, timeout_s=5, limit=100))
    assert result.error and time.monotonic() - started < 2.0, result
    assert not (tmp_path / "new.txt").exists()
