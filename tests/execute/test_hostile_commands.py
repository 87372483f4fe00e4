"""Hostile commands through the real bash tool in the default (bubblewrap) sandbox: the host is unaffected.

Each test plants canaries outside the workspace (in tmp_path, the host's /etc, the host's home) and
checks afterwards that they are untouched, unread and that nothing the command started lives on.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import platform
import shlex
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harnessevolve.core.tasks import Check, Task
from harnessevolve.execute.tools import ToolResult, run_tool
from harnessevolve.execute.workspace import WorkspaceError, create_workspace, remove_workspace
from harnessevolve.harness.model import ToolSpec
from harnessevolve.sandbox import seccomp
from harnessevolve.sandbox.base import BwrapSandbox, Sandbox, SandboxLimits, make_sandbox

pytestmark = pytest.mark.skipif(
    not os.access("/usr/bin/bwrap", os.X_OK),
    reason="/usr/bin/bwrap is not installed (apt-get install bubblewrap); CI installs it",
)

REPO = Path(__file__).resolve().parents[2]
BASH = ToolSpec("bash", "run a command", {"type": "object", "required": ["command"]}, builtin="bash")
READ = ToolSpec("read_file", "read", {"type": "object", "required": ["path"]}, builtin="read_file")
WRITE = ToolSpec("write_file", "write", {"type": "object", "required": ["path"]}, builtin="write_file")


@dataclass
class Host:
    """What the host has outside the workspace, to check afterwards."""

    root: Path
    workspace: Path
    canary_dir: Path
    canary_file: Path
    secret_file: Path
    secret: str

    def untouched(self) -> None:
        assert sorted(p.name for p in self.canary_dir.iterdir()) == ["a.txt", "b.txt"]
        assert self.canary_file.read_text() == "canary\n"
        assert (self.canary_file.stat().st_mode & 0o777) == 0o640
        assert self.secret_file.read_text() == self.secret
        assert sorted(p.name for p in self.root.iterdir()) == ["canary", "secret", "ws"]


@pytest.fixture
def host(tmp_path: Path) -> Host:
    canary_dir = tmp_path / "canary"
    canary_dir.mkdir()
    (canary_dir / "a.txt").write_text("canary\n")
    (canary_dir / "b.txt").write_text("canary\n")
    (canary_dir / "a.txt").chmod(0o640)
    secret = f"SECRET-{uuid.uuid4().hex}"
    secret_file = tmp_path / "secret" / "id_ed25519"
    secret_file.parent.mkdir()
    secret_file.write_text(secret)
    secret_file.chmod(0o644)  # even world-readable, it lives outside anything bound into the sandbox
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "task.txt").write_text("hello\n")
    return Host(tmp_path, workspace, canary_dir, canary_dir / "a.txt", secret_file, secret)


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return make_sandbox("bwrap")


def run(
    command: str, workspace: Path, sandbox: Sandbox | None, *, timeout_s: float = 10.0, limit: int = 20000
) -> ToolResult:
    return asyncio.run(
        run_tool(BASH, {"command": command}, workspace, timeout_s=timeout_s, limit=limit, sandbox=sandbox)
    )


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def leftovers(marker: str, wait_s: float = 5.0) -> str:
    """Processes on the host whose command line contains ``marker`` (waits for them to go first)."""
    deadline = time.monotonic() + wait_s
    while True:
        found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout.strip()
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


# --- deleting and writing outside the workspace ------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf {canary}",
        "rm -rf ../canary ../../* ../..; rm -rf ../*",
        "cd / && rm -rf --no-preserve-root / 2>/dev/null; echo done",
        "find / -name a.txt -path '*canary*' -delete 2>/dev/null; true",
    ],
    ids=["absolute", "dot-dot", "root", "find-delete"],
)
def test_delete_outside(host: Host, sandbox: Sandbox, command: str) -> None:
    run(command.format(canary=host.canary_dir), host.workspace, sandbox)
    host.untouched()


def test_write_outside_by_path(host: Host, sandbox: Sandbox) -> None:
    command = f"echo pwned > {host.root}/pwned; echo pwned > ../pwned; mkdir ../../pwned-dir; touch /pwned"
    run(command, host.workspace, sandbox)
    host.untouched()
    assert not Path("/pwned").exists()


def test_write_system_folders(host: Host, sandbox: Sandbox) -> None:
    before = digest("/etc/hosts"), digest("/etc/passwd")
    name = f"he-pwned-{uuid.uuid4().hex[:8]}"
    result = run(
        f"echo 'evil 1.2.3.4' >> /etc/hosts; echo 'x::0:0::/:/bin/sh' >> /etc/passwd; touch /etc/{name}; "
        f"touch /usr/bin/{name}; cp /bin/sh /usr/local/bin/{name}; touch /lib/{name}",
        host.workspace,
        sandbox,
    )
    assert result.error and "Read-only file system" in result.output
    assert (digest("/etc/hosts"), digest("/etc/passwd")) == before
    for folder in ("/etc", "/usr/bin", "/usr/local/bin", "/lib"):
        assert not Path(folder, name).exists()


def test_write_host_home(host: Host, sandbox: Sandbox) -> None:
    home = Path(os.environ.get("HOME", "/root"))
    name = f".he-pwned-{uuid.uuid4().hex[:8]}"
    result = run(f"echo pwned > {home}/{name}; echo 'rm -rf ~' >> {home}/.bashrc", host.workspace, sandbox)
    assert result.error
    assert not (home / name).exists()


def test_chmod_and_chown_host_files(host: Host, sandbox: Sandbox) -> None:
    mode = Path("/etc/passwd").stat().st_mode
    run(
        f"chmod 777 {host.canary_file} /etc/passwd; chown nobody {host.canary_file}; "
        f"chattr +i {host.canary_file}; chmod -R 000 {host.root}",
        host.workspace,
        sandbox,
    )
    host.untouched()
    assert host.canary_file.stat().st_uid == os.geteuid() and Path("/etc/passwd").stat().st_mode == mode


def test_mount_and_namespaces(host: Host, sandbox: Sandbox) -> None:
    result = run(
        "mount -t tmpfs none /usr && echo MOUNTED; mount --bind / /tmp && echo MOUNTED; "
        "unshare -r true && echo UNSHARED; unshare --mount --user true && echo UNSHARED; "
        "mount -o remount,rw /etc && echo MOUNTED",
        host.workspace,
        sandbox,
    )
    assert "MOUNTED" not in result.output and "UNSHARED" not in result.output


RAW_SYSCALLS = (
    "import ctypes, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "calls = {{'clone': ({clone}, 0x10000000 | 17), 'unshare': ({unshare}, 0x10000000),\n"
    "         'setns': ({setns}, 0)}}\n"
    "for name, (nr, arg) in calls.items():\n"
    "    got = libc.syscall(nr, arg, 0, 0, 0, 0)\n"
    "    if got == 0 and name == 'clone':\n"
    "        os._exit(0)  # the child of a clone that worked\n"
    "    print(name, 'ALLOWED' if got >= 0 else 'refused')\n"
)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="syscall numbers of these two")
@pytest.mark.parametrize("filtered", [True, False], ids=["seccomp", "inner-bwrap"])
def test_raw_namespace_syscalls_are_refused(
    host: Host, filtered: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new user namespace by raw ``clone``/``unshare`` (not through unshare(1)) or joining one by
    ``setns``: refused by the seccomp filter (root) or the inner bwrap (without it)."""
    if not filtered:
        monkeypatch.setenv("HARNESSEVOLVE_NO_SECCOMP", "1")
    abi = seccomp.ABIS[platform.machine()]
    script = RAW_SYSCALLS.format(clone=abi.clone, unshare=abi.unshare, setns=abi.setns)
    threads = (
        "import threading; t = threading.Thread(target=print, args=('THREADS WORK',)); t.start(); t.join()"
    )
    result = run(
        f"python3 -c {shlex.quote(script)}; python3 -c {shlex.quote(threads)}; (true &) && echo FORKS WORK",
        host.workspace,
        make_sandbox("bwrap"),
    )
    assert "ALLOWED" not in result.output, result.output
    assert result.output.count("refused") == 3, result.output
    assert "THREADS WORK" in result.output and "FORKS WORK" in result.output  # clone3 falls back to clone


# --- reading what is not theirs -------------------------------------------------------------------------


def test_read_etc_shadow(host: Host, sandbox: Sandbox) -> None:
    result = run("cat /etc/shadow /etc/gshadow; head -c 100 /etc/sudoers", host.workspace, sandbox)
    assert result.error
    if os.access("/etc/shadow", os.R_OK):  # we can read it (root): none of it may appear
        for line in Path("/etc/shadow").read_text().splitlines()[:5]:
            assert line not in result.output


def test_read_root_and_home(host: Host, sandbox: Sandbox) -> None:
    result = run("ls -la /root /home; cat /root/.bash_history ~root/.ssh/id_*", host.workspace, sandbox)
    assert result.error and "No such file or directory" in result.output
    if Path("/root").is_dir() and os.access("/root", os.R_OK):
        for name in os.listdir("/root"):
            assert f" {name}\n" not in result.output


def test_read_host_secret_file(host: Host, sandbox: Sandbox) -> None:
    result = run(
        f"cat {host.secret_file}; cat ../secret/*; ls -R {host.root}; "
        "grep -rs SECRET- /tmp /home /root /work /var 2>/dev/null; "
        "echo FOUND:; find / -path /proc -prune -o -name id_ed25519 -print 2>/dev/null",
        host.workspace,
        sandbox,
        timeout_s=30,
    )
    assert host.secret not in result.output
    assert "id_ed25519" not in result.output.split("FOUND:")[1]  # the file does not even exist inside


def test_read_the_repository(host: Host, sandbox: Sandbox) -> None:
    result = run(f"cat {REPO}/pyproject.toml; ls {REPO}; cat {REPO}/.git/config", host.workspace, sandbox)
    assert result.error
    assert "[project]" not in result.output and "harnessevolve" not in result.output


def test_api_keys_in_the_environment_never_reach_commands(
    host: Host, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    result = run(
        f"env; export; cat /proc/self/environ /proc/1/environ /proc/{os.getpid()}/environ; "
        "cat /proc/*/environ",
        host.workspace,
        sandbox,
    )
    assert "PATH=" in result.output  # the commands did run
    assert key not in result.output and "OPENAI_API_KEY" not in result.output


# --- symlinks and /proc ---------------------------------------------------------------------------------


def test_symlink_to_a_host_secret(host: Host, sandbox: Sandbox) -> None:
    result = run(f"ln -s {host.secret_file} leak && cat leak", host.workspace, sandbox)
    assert host.secret not in result.output
    read = asyncio.run(run_tool(READ, {"path": "leak"}, host.workspace, timeout_s=5, limit=1000))
    assert read.error == "PermissionError" and host.secret not in read.output


def test_symlink_write_through(host: Host, sandbox: Sandbox) -> None:
    passwd = digest("/etc/passwd")
    run(
        f"ln -s {host.canary_file} c && echo pwned > c; ln -s /etc/passwd p && echo x >> p; "
        f"ln -s {host.canary_dir} d && rm -rf d/ && touch d/new",
        host.workspace,
        sandbox,
    )
    host.untouched()
    assert digest("/etc/passwd") == passwd
    write = asyncio.run(
        run_tool(WRITE, {"path": "c", "content": "pwned"}, host.workspace, timeout_s=5, limit=1000)
    )
    assert write.error == "PermissionError"
    host.untouched()


def test_escape_through_proc(host: Host, sandbox: Sandbox) -> None:
    result = run(
        f"ls /proc/1/root/; cat /proc/1/root{host.secret_file}; cat /proc/*/root{host.secret_file}; "
        f"ls /proc/{os.getpid()}/root/; cat /proc/{os.getpid()}/cwd/../secret/*; ls /proc/1/root/root; "
        f"echo pwned > /proc/1/root{host.canary_file}; echo PIDS=$(ls /proc | grep -c '^[0-9]')",
        host.workspace,
        sandbox,
    )
    assert host.secret not in result.output
    host.untouched()
    process_count = int(result.output.split("PIDS=")[1].split()[0])
    assert 0 < process_count < 10  # only the sandbox's own processes are visible


# --- the network ----------------------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on the host's loopback; records every connection it accepts."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    accepted: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, address = server.accept()
            except TimeoutError:
                continue
            accepted.append(str(address))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


def test_no_connection_to_the_host(host: Host, sandbox: Sandbox, listener: tuple[int, list[str]]) -> None:
    port, accepted = listener
    probe = socket.create_connection(("127.0.0.1", port), 2)  # the listener works from the host
    probe.close()
    result = run(
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}))\" && echo CONNECTED; "
        f"echo hi > /dev/tcp/127.0.0.1/{port} && echo CONNECTED; "
        f"command -v curl >/dev/null && curl -sS -m 2 http://127.0.0.1:{port}/ && echo CONNECTED",
        host.workspace,
        sandbox,
    )
    time.sleep(0.3)
    assert "CONNECTED" not in result.output
    assert len(accepted) == 1  # only the host's own probe


def test_no_external_network(host: Host, sandbox: Sandbox) -> None:
    result = run(
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), 3); print('CONNECTED')\"; "
        "python3 -c \"import socket; print(socket.gethostbyname('example.com')); print('RESOLVED')\"; "
        "echo x > /dev/tcp/8.8.8.8/53 && echo CONNECTED; ip -o link 2>/dev/null | grep -v ' lo:'; true",
        host.workspace,
        sandbox,
    )
    assert "CONNECTED" not in result.output and "RESOLVED" not in result.output
    assert "unreachable" in result.output.lower() or "failure" in result.output.lower()


# --- resource exhaustion --------------------------------------------------------------------------------


def test_fork_bomb_is_contained(host: Host, sandbox: Sandbox) -> None:
    marker = f"he-bomb-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    run(f"bash -c 'b(){{ b | b & }}; b; wait' {marker}", host.workspace, sandbox, timeout_s=3)
    assert time.monotonic() - started < 15
    assert leftovers(marker) == ""
    assert subprocess.run(["true"]).returncode == 0  # the host can still start processes
    # The process limit, whatever the load: a loop that forks until the first refusal and says so
    # (the bomb above may be cut by its 3 s timeout before it reaches the limit on a busy machine).
    forks = (
        "import os, time\n"
        "n = 0\n"
        "while True:\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError as exc:\n"
        "        print('LIMIT', n, exc.errno)\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(20)\n"
        "        os._exit(0)\n"
        "    n += 1\n"
    )
    (host.workspace / "forks.py").write_text(forks)
    limited = run("python3 forks.py", host.workspace, sandbox, timeout_s=60)
    assert "LIMIT" in limited.output, limited.output  # the fork was refused (EAGAIN), not timed out
    _, count, errno = limited.output.split()[:3]
    assert int(count) < 10_000 and errno == "11", limited.output  # EAGAIN at rollout_processes


def test_memory_bomb_is_contained(host: Host, sandbox: Sandbox) -> None:
    started = time.monotonic()
    result = run(
        "python3 -c 'x = bytearray(4 * 1024**3); print(\"ALLOCATED\")'; "
        'perl -e \'$x = "a" x (4 * 1024**3); print "ALLOCATED"\'',
        host.workspace,
        sandbox,
        timeout_s=30,
    )
    assert time.monotonic() - started < 20
    assert "ALLOCATED" not in result.output and "MemoryError" in result.output


def test_endless_output_is_capped(host: Host, sandbox: Sandbox) -> None:
    started = time.monotonic()
    result = run("yes pwned", host.workspace, sandbox, timeout_s=30, limit=1000)
    assert time.monotonic() - started < 10
    assert len(result.output) < 1200 and "more characters cut" in result.output


def test_sleep_forever_is_killed(host: Host, sandbox: Sandbox) -> None:
    marker = f"he-sleeper-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    result = run(f"exec -a {marker} sleep 1000", host.workspace, sandbox, timeout_s=1)
    assert result.error == "timeout" and time.monotonic() - started < 8
    assert leftovers(marker) == ""


def test_background_process_does_not_outlive_the_command(host: Host, sandbox: Sandbox) -> None:
    marker = f"he-daemon-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    result = run(
        f"nohup bash -c 'exec -a {marker} sleep 1000' >/dev/null 2>&1 & "
        f"setsid bash -c 'exec -a {marker}-2 sleep 1000' </dev/null >/dev/null 2>&1 & "
        f"(trap '' HUP TERM; exec -a {marker}-3 sleep 1000) & disown -a; echo started",
        host.workspace,
        sandbox,
        timeout_s=20,
    )
    assert result.output.strip() == "started" and time.monotonic() - started < 8
    assert leftovers(marker) == ""


def test_kill_everything(host: Host, sandbox: Sandbox) -> None:
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        run(
            f"kill -9 -1; kill -9 {os.getpid()} {bystander.pid} 1; pkill -9 -f sleep", host.workspace, sandbox
        )
        assert bystander.poll() is None  # a host process survives, and so did we
    finally:
        bystander.kill()
        bystander.wait()


def test_huge_file_is_cut_at_the_size_limit(host: Host) -> None:
    sandbox = BwrapSandbox(SandboxLimits(max_file_mb=4))
    result = run("head -c 100M /dev/zero > big; echo $?", host.workspace, sandbox)
    assert (host.workspace / "big").stat().st_size <= 4 * 1024 * 1024
    assert result.output.strip().splitlines()[-1] != "0"


def test_cpu_hog_is_stopped_by_the_cpu_limit(host: Host) -> None:
    sandbox = BwrapSandbox(SandboxLimits(cpu_s=1))
    started = time.monotonic()
    result = run("while :; do :; done", host.workspace, sandbox, timeout_s=30)
    assert result.error and result.error != "timeout"
    assert time.monotonic() - started < 15


# --- the workspace itself still works, and setup commands are sandboxed too ---------------------------------


def test_the_workspace_is_usable(host: Host, sandbox: Sandbox) -> None:
    result = run(
        f"cat task.txt && echo made > {host.workspace}/new.txt && mkdir -p d/e && echo x > d/e/f && "
        "echo tmp > /tmp/t && cat /tmp/t && pwd",
        host.workspace,
        sandbox,
    )
    assert result.error is None, result.output
    assert result.output.split() == ["hello", "tmp", str(host.workspace)]
    assert (host.workspace / "new.txt").read_text() == "made\n" and (host.workspace / "d/e/f").exists()


def test_setup_commands_run_in_the_sandbox(tmp_path: Path) -> None:
    outside = tmp_path / "setup-pwned"
    task = Task(
        id="hostile-setup",
        instruction="",
        split="train",
        checks=(Check(type="answer", expected="x"),),
        setup_commands=("echo ok > inside.txt", f"touch {outside} || true"),
    )
    workspace = asyncio.run(create_workspace(task))
    try:
        assert (workspace / "inside.txt").read_text() == "ok\n"
        assert not outside.exists()
    finally:
        remove_workspace(workspace)
    failing = Task(
        id="hostile-setup-2",
        instruction="",
        split="train",
        checks=(Check(type="answer", expected="x"),),
        setup_commands=(f"touch {outside}",),
    )
    with pytest.raises(WorkspaceError, match="setup command failed"):
        asyncio.run(create_workspace(failing))
    assert not outside.exists()
