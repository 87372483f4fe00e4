"""What a workspace holds while it lives: its uid (unique across concurrent harnessevolve processes),
its hand-over to that uid (off the event loop), and its removal (never through a planted symlink,
also as a non-root user). Each with a positive control that shows the probe would see the hole.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from harnessevolve.core.tasks import Check, Task
from harnessevolve.execute.tools import run_shell
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.sandbox import launch
from harnessevolve.sandbox.base import BwrapSandbox
from harnessevolve.sandbox.launch import (
    SandboxLimits,
    claim_workspace,
    hand_over,
    release_vanished,
    remove_tree,
)

REPO = Path(__file__).resolve().parents[2]
HAS_BWRAP = os.access("/usr/bin/bwrap", os.X_OK)
AS_ROOT = os.geteuid() == 0
needs_root_and_bwrap = pytest.mark.skipif(
    not (AS_ROOT and HAS_BWRAP), reason="uids per workspace: root + bwrap"
)
NOBODY = 65534
AS_NOBODY = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")


@pytest.fixture(scope="module")
def package_for_nobody():
    """A PYTHONPATH holding the package, readable by nobody: the checkout may sit under a folder
    nobody cannot enter (``mktemp -d`` makes one 0700), so the package is copied to one that it can."""
    holder = Path(tempfile.mkdtemp(prefix="he-nobody-pkg-"))
    holder.chmod(0o755)
    shutil.copytree(
        REPO / "harnessevolve", holder / "harnessevolve", ignore=shutil.ignore_patterns("__pycache__")
    )
    for path in holder.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    yield str(holder)
    shutil.rmtree(holder, ignore_errors=True)


# --- uids of two concurrent harnessevolve processes --------------------------------------------------

ALLOCATE = textwrap.dedent(
    """
    import asyncio, json, random, sys
    random.seed(7)  # both processes try the same uids in the same order: only the locks keep them apart
    from harnessevolve.core.tasks import Check, Task
    from harnessevolve.sandbox import uids as sandbox_uids
    from harnessevolve.execute.tools import run_shell
    from harnessevolve.execute.workspace import create_workspace, remove_workspace
    if sys.argv[1] == "unlocked":  # the positive control: the same allocation with lockf a no-op
        sandbox_uids.fcntl.lockf = lambda *args: None

    task = Task(id="uid", instruction="", split="train", checks=(Check(type="answer", expected="x"),))

    async def main():
        workspaces = [await create_workspace(task) for _ in range(int(sys.argv[2]))]
        uids = []
        for workspace in workspaces:  # the uid the sandboxed command really runs as
            result = await run_shell("id -u", workspace, timeout_s=20, limit=100)
            uids.append(int(result.output.split()[0]))
        print(json.dumps(uids), flush=True)
        sys.stdin.readline()  # hold every workspace (and its uid) until the other process has its own
        for workspace in workspaces:
            remove_workspace(workspace)

    asyncio.run(main())
    """
)


def two_processes_allocating(mode: str, lock_dir: Path, count: int = 12) -> tuple[list[int], list[int]]:
    env = {**os.environ, "HARNESSEVOLVE_UID_LOCK_DIR": str(lock_dir)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ALLOCATE, mode, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        for _ in range(2)
    ]
    try:
        first, second = (json.loads(p.stdout.readline()) for p in procs)  # type: ignore[union-attr]
    finally:
        for p in procs:
            p.communicate("\n", timeout=60)
    return first, second


@needs_root_and_bwrap
def test_two_concurrent_processes_never_share_a_sandbox_uid(tmp_path: Path) -> None:
    first, second = two_processes_allocating("locked", tmp_path / "uids")
    assert len(set(first)) == len(first) == 12 and len(set(second)) == 12
    assert not set(first) & set(second), sorted(set(first) & set(second))
    assert all(uid >= 300_000 for uid in first + second)


@needs_root_and_bwrap
def test_positive_control_without_the_locks_the_two_processes_collide(tmp_path: Path) -> None:
    first, second = two_processes_allocating("unlocked", tmp_path / "uids")
    assert set(first) & set(second)  # the probe sees a collision when the locks are not there


def test_the_uid_lock_folder_must_be_ours_alone(tmp_path: Path) -> None:
    from harnessevolve.core.errors import SandboxError
    from harnessevolve.sandbox.uids import lease_uid

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(SandboxError, match="only we can write"):
        lease_uid(shared)
    lease = lease_uid(tmp_path / "ok")
    lease.release()


# --- handing a big workspace over, off the event loop ---------------------------------------------------


@needs_root_and_bwrap
def test_handing_50k_files_over_does_not_stall_the_event_loop() -> None:
    task = Task(id="big", instruction="", split="train", checks=(Check(type="answer", expected="x"),))
    workspace = asyncio.run(create_workspace(task))  # a tmpfs as root: quick to fill
    for d in range(50):
        folder = workspace / f"d{d}"
        folder.mkdir()
        for f in range(1000):
            (folder / f"f{f}").touch()
    sandbox = BwrapSandbox()
    gaps: list[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async def main() -> tuple[str, float]:
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(stop))
        started = time.monotonic()
        result = await run_shell("ls d49 | wc -l", workspace, timeout_s=120, limit=100, sandbox=sandbox)
        took = time.monotonic() - started
        stop.set()
        await tick
        return result.output.strip(), took

    try:
        output, took = asyncio.run(main())
        assert output == "1000"
        assert max(gaps) < 0.25, f"the event loop stalled {max(gaps):.2f}s during a {took:.2f}s command"
        # Positive control: the same hand-over done on the loop would have stalled it that long.
        for path in workspace.rglob("*"):
            os.lchown(path, 0, 0)
        started = time.monotonic()
        hand_over(workspace, claim_workspace(workspace)[1])
        blocking = time.monotonic() - started
        assert blocking > 2 * max(gaps), (blocking, max(gaps))
    finally:
        remove_workspace(workspace)


# --- removal never follows a symlink, also as a non-root user -------------------------------------------

REMOVE_AS_NOBODY = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from harnessevolve.sandbox.launch import remove_tree
    root = Path(sys.argv[1])
    host_file = root / "host-file"
    host_file.write_text("mine"); host_file.chmod(0o600)
    ws = root / "ws"; (ws / "a").mkdir(parents=True); (ws / "b").mkdir()
    (ws / "a" / "link").symlink_to(host_file)
    (ws / "b" / "dirlink").symlink_to(root)
    (ws / "a").chmod(0o500); (ws / "b").chmod(0o500)  # a command can do that: unlinking then fails
    if sys.argv[2] == "old":  # the positive control: what cleanup did before
        import shutil
        def make_writable(func, target, _exc):
            os.chmod(os.path.dirname(target), 0o700); os.chmod(target, 0o700); func(target)
        shutil.rmtree(ws, onerror=make_writable)
    else:
        remove_tree(ws)
    print(oct(host_file.stat().st_mode & 0o777), ws.exists(), oct(root.stat().st_mode & 0o777))
    """
)


@pytest.mark.skipif(not AS_ROOT or shutil.which("setpriv") is None, reason="needs root to become nobody")
@pytest.mark.parametrize(
    ("mode", "host_mode", "root_mode"), [("new", "0o600", "0o755"), ("old", "0o700", "0o700")]
)
def test_removal_as_a_non_root_user_never_chmods_through_a_symlink(
    mode: str, host_mode: str, root_mode: str, package_for_nobody: str
) -> None:
    """As nobody (the system Python, the package from the checkout): a workspace folder without
    write permission holding symlinks to a host file and folder. remove_tree removes it and leaves
    the host file's mode alone; the old cleanup (the control) chmods the host file through the link."""
    root = Path(tempfile.mkdtemp(prefix="he-nobody-"))
    try:
        os.chown(root, NOBODY, NOBODY)
        root.chmod(0o755)
        done = subprocess.run(
            [*AS_NOBODY, "/usr/bin/python3", "-c", REMOVE_AS_NOBODY, str(root), mode],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PYTHONPATH": package_for_nobody, "PATH": "/usr/bin:/bin"},
        )
        assert done.returncode == 0, done.stderr
        found_mode, ws_left, found_root_mode = done.stdout.split()
        assert (found_mode, found_root_mode, ws_left) == (host_mode, root_mode, "False")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_remove_tree_as_us_restores_folder_permissions_without_following_links(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.write_text("x")
    host.chmod(0o600)
    ws = tmp_path / "ws"
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "link").symlink_to(host)
    (ws / "a" / "b").chmod(0o000)
    (ws / "a").chmod(0o500)
    remove_tree(ws)
    assert not ws.exists() and (host.stat().st_mode & 0o777) == 0o600


# --- the sandbox as a non-root user ---------------------------------------------------------------------

NON_ROOT_ROLLOUT = textwrap.dedent(
    """
    import asyncio, json, os
    from harnessevolve.core.tasks import Check, Task
    from harnessevolve.sandbox.base import make_sandbox
    from harnessevolve.sandbox.limits import cgroup_mode
    from harnessevolve.execute.tools import run_shell
    from harnessevolve.execute.workspace import create_workspace, remove_workspace

    async def main():
        sandbox = make_sandbox("bwrap")
        task = Task(id="nr", instruction="", split="train", checks=(Check(type="answer", expected="x"),))
        workspace = await create_workspace(task, sandbox=sandbox)
        out = {"cgroup": cgroup_mode()}
        for key, command in {
            "id": "id -u",
            "home": "ls /home /root 2>&1 | head -2",
            "big": "head -c 100M /dev/zero > big; stat -c %s big",
            "write_out": "touch /tmp/../etc/x 2>&1; echo hi > /usr/x 2>&1; true",
        }.items():
            out[key] = (await run_shell(command, workspace, timeout_s=20, limit=2000, sandbox=sandbox)).output
        remove_workspace(workspace)
        out["removed"] = not workspace.exists()
        print(json.dumps(out))

    asyncio.run(main())
    """
)


@pytest.mark.skipif(not (AS_ROOT and HAS_BWRAP), reason="needs root to become nobody")
def test_the_sandbox_as_a_non_root_user(package_for_nobody: str) -> None:
    done = subprocess.run(
        [*AS_NOBODY, "/usr/bin/python3", "-c", NON_ROOT_ROLLOUT],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/tmp",
        env={"PYTHONPATH": package_for_nobody, "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )
    if "cannot create a sandbox" in done.stderr:
        pytest.skip("unprivileged user namespaces are off here")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["id"].split()[0] == str(NOBODY)  # as ourselves, in a user namespace
    assert "No such file or directory" in out["home"]
    assert out["big"].split()[-1] == str(64 * 1024 * 1024)  # the per-file limit is what bounds a file
    assert "Read-only file system" in out["write_out"] or "No such file" in out["write_out"]
    assert out["removed"] is True


# --- a run killed with kill -9 leaves its workspace mounted; the next process unmounts it --------------

LEAVE_A_MOUNT = textwrap.dedent(
    """
    import asyncio, os, signal
    from harnessevolve.core.tasks import Check, Task
    from harnessevolve.execute.workspace import create_workspace
    task = Task(id="killed", instruction="", split="train", checks=(Check(type="answer", expected="x"),))
    workspace = asyncio.run(create_workspace(task))
    (workspace / "left.txt").write_text("x")
    print(workspace, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.skipif(not AS_ROOT, reason="workspace tmpfs mounts need root")
def test_the_workspace_of_a_killed_process_is_unmounted_by_the_next_one() -> None:
    from harnessevolve.sandbox import limits as sandbox_limits

    done = subprocess.run([sys.executable, "-c", LEAVE_A_MOUNT], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == -9
    left = Path(done.stdout.strip())
    try:
        assert sandbox_limits.is_workspace_mount(left)  # the control: kill -9 did leave it mounted
        sandbox_limits._sweep_stale_workspaces.cache_clear()
        task = Task(id="next", instruction="", split="train", checks=(Check(type="answer", expected="x"),))
        fresh = asyncio.run(create_workspace(task))
        remove_workspace(fresh)
        assert not sandbox_limits.is_workspace_mount(left) and not left.exists()
    finally:
        sandbox_limits.unmount_workspace(left)
        shutil.rmtree(left, ignore_errors=True)


# --- one workspace's cgroup being made never holds up another's launch --------------------------------


class _FakeCgroup:
    def __init__(self) -> None:
        self.removed = False

    def remove(self) -> None:
        self.removed = True


def test_a_slow_cgroup_of_one_workspace_does_not_hold_up_another(monkeypatch, tmp_path: Path) -> None:
    from harnessevolve.sandbox import launch
    from harnessevolve.sandbox.launch import SandboxLimits, release_workspace, workspace_cgroup

    slow, fast = (tmp_path / "slow").resolve(), (tmp_path / "fast").resolve()
    slow.mkdir()
    fast.mkdir()
    making, go_on = threading.Event(), threading.Event()
    made: dict[str, _FakeCgroup] = {}

    def make_rollout_cgroup(key: str, **_limits: int) -> _FakeCgroup:
        if key == str(slow):
            making.set()
            assert go_on.wait(30)
        return made.setdefault(key, _FakeCgroup())

    monkeypatch.setattr(launch, "make_rollout_cgroup", make_rollout_cgroup)
    limits = SandboxLimits()
    first = threading.Thread(target=claim_workspace, args=(slow, limits))
    first.start()
    try:
        assert making.wait(30)
        # while the slow workspace's cgroup is being made, another workspace is claimed at once
        # (before, both waited on one lock: the wait below ran out; it returns at once when it holds)
        second = threading.Thread(target=claim_workspace, args=(fast, limits))
        second.start()
        second.join(20)
        assert not second.is_alive(), "the second claim waited for the first one's cgroup"
        assert workspace_cgroup(fast) is made[str(fast)]
        # and the slow one, released meanwhile, gives its cgroup back once it exists
        releasing = threading.Thread(target=release_workspace, args=(slow,))
        releasing.start()
    finally:
        go_on.set()
        first.join(30)
    releasing.join(30)
    assert made[str(slow)].removed and workspace_cgroup(slow) is None
    release_workspace(fast)
    assert made[str(fast)].removed


def test_release_vanished_gives_back_the_claims_of_removed_workspaces_only(tmp_path: Path) -> None:
    """A process that makes no further claim (a rollout worker stopping) gives back the uid and
    cgroup of each workspace someone else removed, and keeps those of workspaces still there."""
    gone, kept = tmp_path / "gone", tmp_path / "kept"
    gone.mkdir()
    kept.mkdir()
    gone, _ = claim_workspace(gone, SandboxLimits())
    kept, _ = claim_workspace(kept, SandboxLimits())
    claim = launch._claims[str(gone)]
    cgroup = claim.cgroup
    remove_tree(gone)  # as the driver removes a worker's workspace
    assert str(gone) in launch._claims  # nobody gave it back yet: the next claim, or this, would
    try:
        assert release_vanished() >= 1
        assert str(gone) not in launch._claims and claim.released
        if cgroup is not None:
            assert not cgroup.memory.exists() and not cgroup.pids.exists()
        assert str(kept) in launch._claims and not launch._claims[str(kept)].released
    finally:
        remove_workspace(kept)


def test_the_cgroup_tree_is_probed_by_one_thread_at_a_time(monkeypatch) -> None:
    """A process's first launches come from several threads at once; two probes of the cgroup tree
    at once made the same probe folder, so one judged the tree unusable and the process could run
    with no rollout cgroup at all. ``cgroup_layout`` probes under a lock. Each probe below waits for
    a second one to arrive: unguarded (the positive control) two meet; through the lock the first
    waits in vain (a short timeout) and the second comes after it."""
    from harnessevolve.sandbox import limits as sandbox_limits

    def overlap(call, wait_s: float) -> int:
        meet = threading.Barrier(2, timeout=wait_s)
        inside, most, count_lock = [0], [0], threading.Lock()

        def probe() -> None:
            with count_lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            with contextlib.suppress(threading.BrokenBarrierError):
                meet.wait()
            with count_lock:
                inside[0] -= 1

        monkeypatch.setattr(sandbox_limits, "_probe_layout", probe)
        threads = [threading.Thread(target=call) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        return most[0]

    # the control's two probes meet as soon as both are there (a late one can only hide an overlap)
    assert overlap(lambda: sandbox_limits._probe_layout(), wait_s=30) == 2
    assert overlap(sandbox_limits.cgroup_layout, wait_s=0.3) == 1
