"""Sandboxes: command lines, limits, detection of bwrap and Docker, and how make_sandbox refuses."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harnessevolve.core.errors import HarnessEvolveError, SandboxError
from harnessevolve.execute.tools import run_shell
from harnessevolve.sandbox import bwrap as bwrap_sandbox
from harnessevolve.sandbox import docker as docker_sandbox
from harnessevolve.sandbox import launch as sandbox_launch
from harnessevolve.sandbox import seccomp
from harnessevolve.sandbox.base import (
    SANDBOXES,
    BwrapSandbox,
    DockerSandbox,
    SandboxLimits,
    UnsafeNoSandbox,
    default_sandbox_name,
    make_sandbox,
    resolve_sandbox,
)

HAS_BWRAP = os.access("/usr/bin/bwrap", os.X_OK)


def fake_program(folder: Path, name: str, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


@pytest.fixture(autouse=True)
def _fresh_probes() -> None:
    bwrap_sandbox.probe_bwrap.cache_clear()
    docker_sandbox.probe_docker.cache_clear()


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder the sandbox's user (nobody, when tests run as root) can enter and write."""
    folder = Path(tempfile.mkdtemp(prefix="he-test-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


# --- limits -------------------------------------------------------------------------------------------


def test_limits_defaults_and_prlimit_options() -> None:
    limits = SandboxLimits()
    assert (limits.cpu_s, limits.memory_mb, limits.max_processes, limits.max_file_mb) == (60, 1024, 256, 64)
    argv = SandboxLimits(cpu_s=5, memory_mb=100, max_processes=10, max_file_mb=2).prlimit_argv()
    assert argv[0] == "prlimit" and argv[-1] == "--"
    assert {"--cpu=5", f"--as={100 << 20}", "--nproc=10", f"--fsize={2 << 20}", "--core=0"} <= set(argv)


def test_limits_refuse_zero() -> None:
    with pytest.raises(ValueError, match="max_processes"):
        SandboxLimits(max_processes=0)


# --- bwrap command line -------------------------------------------------------------------------------


def test_bwrap_argv_isolates_and_binds_only_the_workspace(tmp_path: Path) -> None:
    sandbox = BwrapSandbox(SandboxLimits(cpu_s=7), read_only_paths=("/opt/tool",))
    argv = sandbox.argv("echo hi", tmp_path, None)
    assert argv[0] == "/usr/bin/bwrap"
    for flag in ("--die-with-parent", "--new-session", "--unshare-all", "--unshare-user", "--disable-userns"):
        assert flag in argv
    triples = list(zip(argv, argv[1:], argv[2:], strict=False))
    binds = [t for t in triples if t[0] in ("--bind", "--dev-bind", "--bind-try")]
    assert binds == [("--bind", str(tmp_path), str(tmp_path))]  # the only writable bind, at its own path
    assert ("--ro-bind", "/usr", "/usr") in triples and ("--ro-bind", "/opt/tool", "/opt/tool") in triples
    assert argv[argv.index("--tmpfs") - 4 : argv.index("--tmpfs") + 2] == (
        "--size",
        str(256 << 20),
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
    )
    assert "--share-net" not in argv and "--cap-add" not in argv and "setpriv" not in argv
    assert not any(path in argv for path in ("/", "/root", "/home", str(Path.home()), os.getcwd()))
    assert argv[argv.index("--chdir") + 1] == str(tmp_path)
    assert argv[-3:] == ("bash", "-c", "echo hi") and "--cpu=7" in argv
    assert argv.index("prlimit") > argv.index("--chdir")


def test_bwrap_argv_as_root_forbids_user_namespaces_by_seccomp_when_it_has_the_filter(tmp_path: Path) -> None:
    argv = BwrapSandbox().argv("id", tmp_path, 300007, seccomp_fd=9)
    outer = argv[: argv.index("setpriv")]
    assert outer[outer.index("--seccomp") + 1] == "9"  # loaded by the outer bwrap, before the command
    assert argv.count("/usr/bin/bwrap") == 1 and "--disable-userns" not in argv  # no inner bwrap
    drop = argv[argv.index("setpriv") : argv.index("prlimit")]
    assert "--reuid=300007" in drop and "--no-new-privs" in drop and drop[-1] == "--"


def test_seccomp_filter_program_is_whole_instructions_ending_in_a_return() -> None:
    for abi in seccomp.ABIS.values():
        code = seccomp.program(abi)
        assert len(code) % 8 == 0 and 8 < len(code) <= 8 * 32
        last_code = int.from_bytes(code[-8:-6], sys.byteorder)
        assert last_code == 0x06  # BPF_RET: the kernel refuses a program that can run off its end


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("bwrap"), reason="the filter is used as root only")
def test_a_kernel_that_refuses_the_filter_gets_the_inner_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe finds bwrap cannot load the filter (here: a program that jumps past its end) and
    the sandbox goes on without it, user namespaces forbidden by the inner bwrap instead."""
    bad = struct.pack("=HBBI", 0x15, 7, 7, 0)  # BPF_JMP|BPF_JEQ to nowhere: the kernel says EINVAL
    monkeypatch.setattr(seccomp, "_native", lambda: bad)
    monkeypatch.setattr(seccomp, "_disabled", False)
    bwrap_sandbox.probe_bwrap.cache_clear()
    try:
        assert bwrap_sandbox.probe_bwrap(shutil.which("bwrap"), True) is None
        assert seccomp.native_program() is None and seccomp.filter_fd() is None
    finally:
        bwrap_sandbox.probe_bwrap.cache_clear()


def test_bwrap_argv_as_root_drops_to_the_given_uid(tmp_path: Path) -> None:
    argv = BwrapSandbox().argv("id", tmp_path, 300007)
    outer = argv[: argv.index("setpriv")]  # privileged: no user namespace, so the uid can change
    assert "--unshare-net" in outer and "--unshare-pid" in outer and "--unshare-user" not in outer
    assert argv[argv.index("--cap-add") : argv.index("--cap-add") + 4] == (
        "--cap-add",
        "CAP_SETUID",
        "--cap-add",
        "CAP_SETGID",
    )
    inner_bwrap = argv.index("/usr/bin/bwrap", 1)
    drop = argv[argv.index("setpriv") : inner_bwrap]
    for option in ("--reuid=300007", "--regid=300007", "--clear-groups", "--no-new-privs", "--inh-caps=-all"):
        assert option in drop
    inner = argv[inner_bwrap : argv.index("prlimit")]  # forbids user namespaces (and so mounts) inside
    assert "--unshare-user" in inner and "--disable-userns" in inner


def test_commands_never_run_as_root(tmp_path: Path) -> None:
    first, again, other = (sandbox_launch.sandbox_uid(tmp_path / name) for name in ("a", "a", "b"))
    if os.geteuid() == 0:
        assert first is not None and other is not None
        assert first >= sandbox_launch.SANDBOX_UID_BASE and first == again != other  # one uid per workspace
    else:
        assert first is None and other is None  # an ordinary user runs them as itself


@pytest.mark.skipif(os.geteuid() != 0, reason="handing the workspace over happens only when running as root")
def test_hand_over_chowns_the_workspace_but_not_where_links_point(tmp_path: Path) -> None:
    outside = tmp_path / "host-file"
    outside.write_text("host")
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "sub" / "f").write_text("x")
    (workspace / "link").symlink_to(outside)
    sandbox_launch.hand_over(workspace, 4242)
    assert (workspace / "sub" / "f").stat().st_uid == 4242 and workspace.stat().st_gid == 4242
    assert (workspace / "link").lstat().st_uid == 4242
    assert outside.stat().st_uid == 0


# --- make_sandbox and detection -------------------------------------------------------------------------


def test_default_is_bwrap_and_registry_names() -> None:
    assert default_sandbox_name() == "bwrap"
    assert set(SANDBOXES) == {"bwrap", "docker", "none"}


def test_unknown_sandbox_lists_the_choices() -> None:
    with pytest.raises(SandboxError, match="unknown sandbox 'jail'") as info:
        make_sandbox("jail")
    assert "bwrap" in info.value.hint and "docker" in info.value.hint
    assert isinstance(info.value, HarnessEvolveError)


def test_none_needs_the_unsafe_flag() -> None:
    with pytest.raises(SandboxError, match="unisolated") as info:
        make_sandbox("none")
    assert "--unsafe-no-sandbox" in info.value.hint
    sandbox = make_sandbox("none", unsafe=True)
    assert isinstance(sandbox, UnsafeNoSandbox)
    assert resolve_sandbox(sandbox) is sandbox


def test_missing_bwrap_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = str(tmp_path / "no-bwrap")
    monkeypatch.setitem(SANDBOXES, "bwrap", lambda limits: BwrapSandbox(limits, bwrap=missing))
    with pytest.raises(SandboxError, match="not installed") as info:
        make_sandbox("bwrap")
    assert "apt-get install bubblewrap" in info.value.hint and "--unsafe-no-sandbox" in info.value.hint


def kernel_settings(folder: Path, **values: str) -> Path:
    """A fake /proc/sys holding ``values`` (``kernel__x`` for ``kernel.x``)."""
    for key, value in values.items():
        path = folder.joinpath(*key.split("__"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    return folder


def fake_bwrap_on_path(folder: Path, monkeypatch: pytest.MonkeyPatch, stderr: str) -> None:
    """``bwrap`` on PATH (before the real one) printing ``stderr`` and failing; the sandbox asks for
    ``bwrap`` by name."""
    fake_program(folder / "bin", "bwrap", f"echo {shlex.quote(stderr)} >&2\nexit 1\n")
    monkeypatch.setenv("PATH", f"{folder / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setitem(SANDBOXES, "bwrap", lambda limits: BwrapSandbox(limits, bwrap="bwrap"))


def test_missing_bwrap_on_path_says_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    monkeypatch.setitem(SANDBOXES, "bwrap", lambda limits: BwrapSandbox(limits, bwrap="bwrap"))
    with pytest.raises(SandboxError, match="bubblewrap is not installed") as info:
        make_sandbox("bwrap")
    assert "apt-get install bubblewrap" in info.value.hint and "--unsafe-no-sandbox" in info.value.hint
    assert "sysctl" not in info.value.hint and "namespaces" not in info.value.message


def test_apparmor_blocked_namespaces_say_the_sysctl_not_install(
    open_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ubuntu 24.04 (GitHub's ubuntu-latest): bwrap is there, AppArmor refuses its uid map."""
    fake_bwrap_on_path(open_dir, monkeypatch, "bwrap: setting up uid map: Permission denied")
    proc_sys = kernel_settings(open_dir / "sys", kernel__apparmor_restrict_unprivileged_userns="1")
    monkeypatch.setattr(bwrap_sandbox, "PROC_SYS", proc_sys)
    with pytest.raises(SandboxError) as info:
        make_sandbox("bwrap")
    message, hint = info.value.message, info.value.hint
    assert "bubblewrap is installed" in message and "user namespaces are blocked" in message
    assert "setting up uid map: Permission denied" in message
    assert "kernel.apparmor_restrict_unprivileged_userns=1" in message
    assert "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in hint
    assert "GitHub" in hint and "workflow step" in hint and "--unsafe-no-sandbox" in hint
    assert "install bubblewrap" not in hint and "apt-get" not in hint
    assert "unprivileged_userns_clone" not in hint  # only the setting that blocks here


def test_debian_blocked_namespaces_name_their_own_sysctl(
    open_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_bwrap_on_path(open_dir, monkeypatch, "bwrap: No permissions to create new namespace")
    proc_sys = kernel_settings(open_dir / "sys", kernel__unprivileged_userns_clone="0")
    monkeypatch.setattr(bwrap_sandbox, "PROC_SYS", proc_sys)
    with pytest.raises(SandboxError, match="user namespaces are blocked.*No permissions") as info:
        make_sandbox("bwrap")
    assert "sudo sysctl -w kernel.unprivileged_userns_clone=1" in info.value.hint
    assert "install bubblewrap" not in info.value.hint


def test_blocked_namespaces_with_unreadable_settings_list_both_sysctls(
    open_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_bwrap_on_path(open_dir, monkeypatch, "bwrap: setting up uid map: Permission denied")
    monkeypatch.setattr(bwrap_sandbox, "PROC_SYS", open_dir / "no-such-proc-sys")
    with pytest.raises(SandboxError, match="user namespaces are blocked") as info:
        make_sandbox("bwrap")
    hint = info.value.hint
    assert "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in hint
    assert "sudo sysctl -w kernel.unprivileged_userns_clone=1" in hint
    assert "install bubblewrap" not in hint


def test_blocking_setting_alone_marks_an_unexplained_failure(
    open_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bwrap fails with words of its own, but the kernel says namespaces are restricted: that is the fix."""
    fake_bwrap_on_path(open_dir, monkeypatch, "bwrap: something else")
    proc_sys = kernel_settings(open_dir / "sys", kernel__apparmor_restrict_unprivileged_userns="1")
    monkeypatch.setattr(bwrap_sandbox, "PROC_SYS", proc_sys)
    with pytest.raises(SandboxError, match="user namespaces are blocked") as info:
        make_sandbox("bwrap")
    assert "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in info.value.hint


def test_other_bwrap_failures_are_not_called_blocked_namespaces(
    open_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_bwrap_on_path(open_dir, monkeypatch, "bwrap: Can't mount proc on /newroot/proc: Device busy")
    proc_sys = kernel_settings(open_dir / "sys", kernel__apparmor_restrict_unprivileged_userns="0")
    monkeypatch.setattr(bwrap_sandbox, "PROC_SYS", proc_sys)
    with pytest.raises(SandboxError, match="cannot create a sandbox here.*Device busy") as info:
        make_sandbox("bwrap")
    assert "blocked" not in info.value.message and "install bubblewrap" not in info.value.hint
    assert "bwrap --unshare-all" in info.value.hint


def test_bwrap_probe_runs_once(open_dir: Path) -> None:
    calls = open_dir / "calls"
    fake = fake_program(open_dir, "bwrap", f"echo x >> {calls}\nexit 1\n")
    sandbox = BwrapSandbox(bwrap=str(fake))
    with pytest.raises(SandboxError):
        sandbox.check()
    first = calls.read_text().count("x")  # as root: with the seccomp filter, then without it
    assert first == (2 if os.geteuid() == 0 and seccomp.native_program() else 1)
    for _ in range(2):
        with pytest.raises(SandboxError):
            sandbox.check()
    assert calls.read_text().count("x") == first


@pytest.mark.skipif(not HAS_BWRAP, reason="/usr/bin/bwrap is not installed (apt-get install bubblewrap)")
def test_real_bwrap_is_usable() -> None:
    assert isinstance(make_sandbox("bwrap"), BwrapSandbox)


def test_docker_without_an_engine_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_program(tmp_path / "bin", "docker", "echo 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    with pytest.raises(SandboxError, match="no Docker engine.*Cannot connect") as info:
        make_sandbox("docker")
    assert "docker info" in info.value.hint


def test_docker_not_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxError, match="docker is not installed"):
        make_sandbox("docker")


def test_docker_when_the_engine_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake engine: the command line isolates the container, and the container is removed after."""
    log = tmp_path / "docker.log"
    fake_program(
        tmp_path / "bin",
        "docker",
        f'echo "$*" >> {log}\ncase "$1" in info) echo 27.0;; run) echo ran;; esac\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    sandbox = make_sandbox("docker", limits=SandboxLimits(memory_mb=300, max_processes=32))
    assert isinstance(sandbox, DockerSandbox)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    result = asyncio.run(run_shell("echo hi", workspace, timeout_s=10, limit=1000, sandbox=sandbox))
    assert result.output.strip() == "ran" and result.error is None
    run_line, rm_line = log.read_text().splitlines()[1:]
    for part in ("--network none", "--read-only", "--cap-drop ALL", "--pids-limit 32", "--memory 300m"):
        assert part in run_line
    assert f"--volume {workspace}:{workspace}:rw" in run_line and run_line.endswith("bash -c echo hi")
    container = run_line.split("--name ")[1].split()[0]
    assert rm_line == f"rm --force {container}"


# --- the unsafe backend ----------------------------------------------------------------------------------


def test_none_runs_plain_bash_in_the_workspace(tmp_path: Path) -> None:
    sandbox = UnsafeNoSandbox()
    with sandbox.launch("pwd", tmp_path, {"PATH": "/usr/bin:/bin"}) as launch:
        assert launch.argv == ("bash", "-c", "pwd") and launch.cwd == tmp_path
    result = asyncio.run(run_shell("pwd", tmp_path, timeout_s=10, limit=1000, sandbox=sandbox))
    assert result.output.strip() == str(tmp_path)


def test_a_process_that_escaped_the_group_cannot_hang_the_tool(tmp_path: Path) -> None:
    """Without a sandbox a ``setsid`` grandchild keeps the output pipe open; the tool still returns."""
    marker = f"he-escapee-{os.getpid()}-{time.monotonic_ns()}"
    started = time.monotonic()
    try:
        result = asyncio.run(
            run_shell(
                f"setsid bash -c 'exec -a {marker} sleep 60' & echo started",
                tmp_path,
                timeout_s=2,
                limit=1000,
                sandbox=UnsafeNoSandbox(),
            )
        )
        assert result.output.startswith("started") and time.monotonic() - started < 20
    finally:
        subprocess.run(["pkill", "-f", marker], check=False)


def test_sandbox_limits_parse_from_the_command_line_form() -> None:
    from harnessevolve.sandbox.launch import SandboxLimits

    limits = SandboxLimits.parse("cpu_s=120, memory_mb=2048")
    assert (limits.cpu_s, limits.memory_mb, limits.max_processes) == (120, 2048, 256)
    for bad in ("cpu=1", "memory_mb=lots", "cpu_s"):
        with pytest.raises(ValueError):
            SandboxLimits.parse(bad)
