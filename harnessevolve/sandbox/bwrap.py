"""The default sandbox: bubblewrap (``bwrap``) namespaces plus kernel resource limits.

Inside, a command sees the system directories (``/usr``, ``/etc``, the ``/bin``/``/lib`` links)
read-only, its own workspace read-write at the same absolute path, an empty private ``/tmp``,
its own ``/proc`` and a minimal ``/dev``; nothing else of the host (no ``/root``, ``/home``, the
repository or other workspaces). It has no network (only its own loopback), its own PID, IPC, UTS
and cgroup namespaces, no capabilities, no new privileges (setuid programs do not elevate) and a new
terminal session. ``prlimit`` applies ``SandboxLimits``; ``--die-with-parent`` plus the PID
namespace mean killing bwrap kills everything the command started.

Two ways to get there, depending on who we are:

- an ordinary user: bwrap makes an unprivileged user namespace (and forbids nested ones); the
  command runs as us, which is harmless since it sees only the workspace and public system files;
- root: bwrap needs no user namespace, and ``setpriv`` drops the command to the workspace's own uid
  (leased machine-wide, ``sandbox_uids``) -- root would ignore the process limit and could read
  root-only files like /etc/shadow. The workspace is handed to that uid first. A second,
  unprivileged bwrap inside then forbids user namespaces, as in the first case.

Every process of one workspace's commands joins that workspace's cgroup (``sandbox_limits``)
before bwrap starts, so the rollout's memory and process count are bounded as a whole; a check's
own files (``read_only``) are bound read-only after the workspace.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from harnessevolve.core.errors import SandboxError
from harnessevolve.sandbox import seccomp
from harnessevolve.sandbox.launch import (
    Launch,
    ReadOnly,
    SandboxLimits,
    claim_workspace,
    limit_watch,
    release_workspace,
    workspace_cgroup,
)
from harnessevolve.sandbox.views import SandboxView, default_view

SYSTEM_DIRS = ("/usr", "/etc")
"""Bound read-only. Their contents are public: root-only files stay unreadable (never run as root)."""
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Recreated as the same symlink (merged-/usr systems) or bound read-only (older layouts)."""
TMP_SIZE_MB = 256
"""Size of the private /tmp (a tmpfs in memory); the workspace is where work is meant to go."""
NAMESPACES_AS_ROOT = (
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
)
NAMESPACES_AS_USER = ("--unshare-all", "--unshare-user", "--disable-userns")


class BwrapSandbox:
    """Runs each command under ``bwrap`` (see the module docstring for what it isolates)."""

    name = "bwrap"

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        bwrap: str = "/usr/bin/bwrap",
        read_only_paths: tuple[str, ...] = (),
        view: SandboxView | None = None,
    ) -> None:
        """``read_only_paths``: more host paths to show inside, read-only (e.g. a toolchain in /opt);
        ``view``: the whole view (``sandbox/views.py``), the built-in suites hidden by default."""
        self.limits = limits or SandboxLimits()
        self.bwrap = bwrap
        self.view = (view or default_view()).adding(read_only=read_only_paths)
        self.writable: ReadOnly = ()
        """(host source, path inside) pairs bound read-write after the read-only ones (an external
        agent's output folder), so that one may sit inside another."""

    def with_view(self, view: SandboxView) -> BwrapSandbox:
        """A copy showing ``view`` (this one unchanged)."""
        derived = copy.copy(self)
        derived.view = view
        return derived

    @property
    def read_only_paths(self) -> tuple[str, ...]:
        """The host paths shown read-only at their own paths (``view.shown``)."""
        return self.view.shown

    def filesystem_args(self, workspace: Path, read_only: ReadOnly = ()) -> list[str]:
        args: list[str] = []
        for path in SYSTEM_DIRS:
            args += ["--ro-bind", path, path]
        for path in SYSTEM_LINKS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--size", str(TMP_SIZE_MB << 20), "--perms", "1777", "--tmpfs", "/tmp"]
        args += self._extra_read_only_args()
        # The folders above the workspace exist only as empty mount points, open to the command's uid.
        for parent in reversed(workspace.parents):
            if str(parent) not in ("/", "/tmp") and not _under(parent, SYSTEM_DIRS + self.read_only_paths):
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--bind", str(workspace), str(workspace)]
        made = set(workspace.parents)
        binds = [("--ro-bind", s, t) for s, t in read_only] + [("--bind", s, t) for s, t in self.writable]
        for option, source, target in binds:  # a check's own files (Harbor's tests/), after the workspace
            for parent in reversed(Path(target).parents):
                if (
                    str(parent) not in ("/", "/tmp")
                    and parent not in made
                    and not _under(parent, (*SYSTEM_DIRS, str(workspace)))
                ):
                    made.add(parent)
                    args += ["--perms", "0755", "--dir", str(parent)]
            args += [option, str(source), str(target)]
            made.add(Path(target))
        shown = [(d, d) for d in SYSTEM_DIRS] + [(p, p) for p in self.view.shown]
        args += mask_args(self.view, shown + [(str(s), str(t)) for s, t in read_only])
        return args + ["--chdir", str(workspace)]

    def _extra_read_only_args(self) -> list[str]:
        """``read_only_paths`` bound read-only (after /tmp, so paths under /tmp show too); the
        folders above them exist only as empty mount points, open to the command's uid."""
        args: list[str] = []
        made: set[Path] = set()
        for path in self.view.shown:
            for parent in reversed(Path(path).parents):
                if (
                    str(parent) not in ("/", "/tmp")
                    and parent not in made
                    and not _under(parent, SYSTEM_DIRS)
                ):
                    made.add(parent)
                    args += ["--perms", "0755", "--dir", str(parent)]
            args += ["--ro-bind", path, path]
        return args

    def argv(
        self,
        command: str,
        workspace: Path,
        uid: int | None,
        read_only: ReadOnly = (),
        *,
        seccomp_fd: int | None = None,
    ) -> tuple[str, ...]:
        """The full command line; ``uid`` is the uid to drop to (we are root) or None (we are not).
        ``seccomp_fd`` (root only): a file descriptor the process inherits holding the filter of
        ``sandbox.seccomp`` that forbids user namespaces; without one a second, unprivileged bwrap
        inside forbids them."""
        if uid is None:
            namespaces: tuple[str, ...] = NAMESPACES_AS_USER
            drop: tuple[str, ...] = ()
        else:
            namespaces = (*NAMESPACES_AS_ROOT, "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID")
            drop = (
                "setpriv",
                f"--reuid={uid}",
                f"--regid={uid}",
                "--clear-groups",
                "--no-new-privs",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--",
            )
            if seccomp_fd is not None:
                namespaces += ("--seccomp", str(seccomp_fd))
            else:  # a second, unprivileged bwrap only to forbid user namespaces (and so mounts) inside
                drop += (
                    self.bwrap,
                    "--unshare-user",
                    "--disable-userns",
                    "--die-with-parent",
                    "--dev-bind",  # the outer sandbox's view as it is; its /dev holds only null, zero, tty...
                    "/",
                    "/",
                    "--",
                )
        return (
            self.bwrap,
            "--die-with-parent",
            "--new-session",
            *namespaces,
            "--hostname",
            "sandbox",
            *self.filesystem_args(workspace, read_only),
            *drop,
            *self.limits.prlimit_argv(),
            "bash",
            "-c",
            command,
        )

    @contextlib.contextmanager
    def launch(
        self, command: str, workspace: Path, env: Mapping[str, str], *, read_only: ReadOnly = ()
    ) -> Iterator[Launch]:
        """``read_only``: (host source, path inside) pairs shown read-only, e.g. a check's files."""
        self.check()
        workspace, uid = claim_workspace(workspace, self.limits)
        fd = seccomp.filter_fd() if uid is not None else None
        try:
            argv = self.argv(command, workspace, uid, read_only, seccomp_fd=fd)
            cgroup = workspace_cgroup(workspace)
            if cgroup is not None:
                argv = cgroup.wrap(argv)
            yield Launch(
                argv,
                env,
                Path("/"),
                limit_notes=limit_watch(workspace, self.limits),
                pass_fds=(fd,) if fd is not None else (),
            )
        finally:
            if fd is not None:
                os.close(fd)

    def check(self) -> None:
        """Raise ``SandboxError`` unless bwrap can start a sandbox here (probed once per process)."""
        problem = probe_bwrap(self.bwrap, os.geteuid() == 0)
        if problem:
            raise SandboxError(problem.message, hint=problem.hint)


def mask_args(view: SandboxView, binds: list[tuple[str, str]]) -> list[str]:
    """bwrap options hiding ``view.hidden`` inside ``binds`` (after them): an empty read-only
    folder over a folder, ``/dev/null`` over a file."""
    args: list[str] = []
    for target, is_dir in view.masks(binds):
        if is_dir:
            args += ["--perms", "0555", "--size", "4096", "--tmpfs", target, "--remount-ro", target]
        else:
            args += ["--ro-bind", "/dev/null", target]
    return args


def _under(path: Path, roots: tuple[str, ...]) -> bool:
    return any(path == Path(root) or Path(root) in path.parents for root in roots)


class BwrapProblem(NamedTuple):
    """Why bwrap cannot start a sandbox here, and what fixes it (``SandboxError``'s message and hint)."""

    message: str
    hint: str


UNSAFE = "or pass --unsafe-no-sandbox to run agent commands without any isolation"
INSTALL_HINT = (
    "install bubblewrap: sudo apt-get install bubblewrap (Fedora: sudo dnf install bubblewrap; "
    f"Arch: sudo pacman -S bubblewrap), {UNSAFE}"
)
UTIL_LINUX_HINT = f"install util-linux: sudo apt-get install util-linux, {UNSAFE}"
PROC_SYS = Path("/proc/sys")
"""Where the kernel's settings are read (tests point it at a fake tree)."""
USERNS_SYSCTLS = (
    # Ubuntu 23.10 and later, GitHub's ubuntu-24.04 (ubuntu-latest) runners among them: AppArmor
    # lets only programs with a profile of their own make unprivileged user namespaces.
    ("kernel.apparmor_restrict_unprivileged_userns", "1", "0"),
    ("kernel.unprivileged_userns_clone", "0", "1"),  # Debian's and older Ubuntu kernels
    ("user.max_user_namespaces", "0", "15000"),
)
"""(setting, its value when it blocks unprivileged user namespaces, the value that lifts it)."""
NAMESPACE_ERROR = re.compile(r"namespace|uid map|gid map|unshare", re.IGNORECASE)
"""What bwrap says when the kernel refuses it a namespace (``setting up uid map: Permission
denied`` under Ubuntu's AppArmor restriction, ``No permissions to create new namespace`` with
``unprivileged_userns_clone=0``, ``Creating new namespace failed`` at ``max_user_namespaces=0``)."""
GITHUB_STEP = (
    "on GitHub's ubuntu-24.04 (ubuntu-latest) runners, add a workflow step after installing bubblewrap: "
    "`run: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (docs/ci/README.md)"
)


def blocking_sysctls(root: Path | None = None) -> list[tuple[str, str, str]]:
    """The ``USERNS_SYSCTLS`` entries that now block unprivileged user namespaces, read from
    ``root`` (default ``PROC_SYS``); settings this kernel lacks are skipped."""
    root = root or PROC_SYS
    found = []
    for name, blocked, lifted in USERNS_SYSCTLS:
        try:
            value = (root / name.replace(".", "/")).read_text().strip()
        except OSError:
            continue
        if value == blocked:
            found.append((name, blocked, lifted))
    return found


def namespaces_blocked(detail: str) -> BwrapProblem:
    """The problem when the kernel refuses bwrap its user namespace: the sysctl that lifts it (the
    one set on this machine when it can be read, else the usual two), never "install bubblewrap"."""
    blocking = blocking_sysctls()
    why = "".join(f", {name}={blocked}" for name, blocked, _ in blocking)
    if blocking:
        commands = " and ".join(f"sudo sysctl -w {name}={lifted}" for name, _, lifted in blocking)
    else:
        (ubuntu, _, on), (debian, _, one) = USERNS_SYSCTLS[:2]
        commands = (
            f"sudo sysctl -w {ubuntu}={on} (Ubuntu 23.10+) or sudo sysctl -w {debian}={one} (Debian), "
            "whichever setting your kernel has"
        )
    return BwrapProblem(
        f"bubblewrap is installed but cannot create a sandbox here: unprivileged user namespaces are "
        f"blocked ({detail}{why})",
        f"allow them: {commands} (to keep it after a reboot, put it in /etc/sysctl.d/); {GITHUB_STEP}; "
        "inside a Docker container, start that with --security-opt seccomp=unconfined --security-opt "
        f"apparmor=unconfined; --sandbox docker needs no user namespaces; {UNSAFE}",
    )


@functools.lru_cache(maxsize=8)
def probe_bwrap(bwrap: str, as_root: bool) -> BwrapProblem | None:
    """None when ``bwrap`` runs a trivial command in a full sandbox; otherwise what went wrong and
    its fix -- bubblewrap missing (install it) is told apart from user namespaces blocked (a sysctl)."""
    program = shutil.which(bwrap)
    if not program:
        return BwrapProblem(f"bubblewrap is not installed ({bwrap} not found)", INSTALL_HINT)
    missing = [tool for tool in ("prlimit", "setpriv" if as_root else "bash") if not shutil.which(tool)]
    if missing:
        return BwrapProblem(
            f"{' and '.join(missing)} (util-linux) not found; the sandbox needs it", UTIL_LINUX_HINT
        )
    workspace = Path(tempfile.mkdtemp(prefix="he-probe-"))
    try:
        workspace, uid = claim_workspace(workspace)

        def worked(proc: subprocess.CompletedProcess[str]) -> bool:
            return proc.returncode == 0 and (workspace / "probe").exists()

        proc = _probe_run(program, workspace, uid, filtered=uid is not None)
        if uid is not None and not worked(proc):
            # a kernel that refuses the seccomp filter: the inner bwrap forbids user namespaces
            proc = _probe_run(program, workspace, uid, filtered=False)
            if worked(proc):
                seccomp.disable()
        if not worked(proc):
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            detail = f"exit {proc.returncode}: {lines[-1] if lines else 'no output'}"
            if NAMESPACE_ERROR.search(proc.stderr or "") or (proc.returncode != 0 and blocking_sysctls()):
                return namespaces_blocked(detail)
            return BwrapProblem(
                f"bubblewrap cannot create a sandbox here ({detail})",
                "run `bwrap --unshare-all --ro-bind / / true` to see why; if unprivileged user namespaces "
                "are disabled: "
                f"sudo sysctl -w {USERNS_SYSCTLS[0][0]}=0 (Ubuntu 23.10+), "
                f"sudo sysctl -w {USERNS_SYSCTLS[1][0]}=1 (Debian); {UNSAFE}",
            )
        return None
    except (OSError, subprocess.SubprocessError) as exc:
        return BwrapProblem(
            f"bubblewrap cannot start: {exc}", f"check that {program} runs (`{program} --version`); {UNSAFE}"
        )
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
        release_workspace(workspace)


def _probe_run(
    bwrap: str, workspace: Path, uid: int | None, *, filtered: bool
) -> subprocess.CompletedProcess[str]:
    fd = seccomp.filter_fd() if filtered else None
    try:
        return subprocess.run(
            BwrapSandbox(bwrap=bwrap).argv("touch probe", workspace, uid, seccomp_fd=fd),
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            pass_fds=(fd,) if fd is not None else (),
        )
    finally:
        if fd is not None:
            os.close(fd)
