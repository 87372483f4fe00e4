"""What one sandboxed command costs the machine, layer by layer, at many commands at once.

Runs ``cat a.txt`` in ``--concurrency`` workspaces at once, ``--commands`` times each, through
growing prefixes of the command line the default bwrap sandbox builds, and prints the whole
machine's CPU per command (``/proc/stat``: every process, the kernel's work included) and
commands/s for each:

* ``bash``: ``bash -c 'cat a.txt'`` alone, no sandbox (the floor);
* ``limits``: under ``prlimit`` (the sandbox's resource limits);
* ``uid drop``: under ``setpriv`` then ``prlimit`` (root only: the workspace's own uid);
* ``outer bwrap``: the namespaces and mounts, nothing forbidding user namespaces (root only);
* ``full``: the command line as it runs; as root the seccomp filter of ``sandbox.seccomp``
  (a new memfd per command, as the sandbox makes it) forbids user namespaces;
* ``full, inner bwrap``: as root, the same with a second, unprivileged bwrap forbidding them
  instead (what runs where the kernel refuses the filter, or with HARNESSEVOLVE_NO_SECCOMP=1);
  its ``added`` is against ``outer bwrap`` too;
* ``full, tmpfs each``: ``full`` with every workspace its own tmpfs, as rollouts have them
  (root only; its ``added`` is against ``full``): every bwrap reads the machine's mount table,
  so more mounts cost every launch.

The layers are the sandbox's real argv cut at ``setpriv``, ``--seccomp`` and ``prlimit``;
the sandbox's cgroup and uid lease are left out (they are per workspace, not per command).

    .venv/bin/python benchmarks/perf/sandbox_launch_cost.py [--concurrency 32] [--commands 20] [--smoke]

Measurements are only as good as the machine is idle: the load average is printed before.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rollout_throughput import MachineClock  # noqa: E402

from harnessevolve.sandbox import seccomp  # noqa: E402
from harnessevolve.sandbox.base import default_sandbox  # noqa: E402
from harnessevolve.sandbox.bwrap import BwrapSandbox  # noqa: E402
from harnessevolve.sandbox.limits import mount_workspace, unmount_workspace  # noqa: E402

COMMAND = "cat a.txt"
UID_BASE = 61000


FD = "-1"
"""The seccomp fd in a layer's argv, replaced by a new filter fd at each launch (``spawn``)."""


def layers(sandbox: BwrapSandbox, workspace: Path, uid: int | None) -> dict[str, list[str]]:
    """Name -> argv: the default sandbox's command line and its prefixes cut at known points."""
    filtered = uid is not None and seccomp.native_program() is not None
    full = sandbox.argv(COMMAND, workspace, uid, seccomp_fd=int(FD) if filtered else None)
    bare = ["bash", "-c", COMMAND]
    limits = list(full[full.index("prlimit") :])
    found = {"bash": bare, "limits": limits}
    if uid is not None:
        drop = full.index("setpriv")
        end = full.index("--", drop)  # setpriv's options end here
        found["uid drop"] = [*full[drop : end + 1], *limits]
        outer = list(full[: end + 1])
        if filtered:
            at = outer.index("--seccomp")
            del outer[at : at + 2]
        found["outer bwrap"] = [*outer, *limits]
    found["full"] = list(full)
    if filtered:
        found["full, inner bwrap"] = list(sandbox.argv(COMMAND, workspace, uid))
    return found


async def spawn(argv: list[str], workspace: Path) -> asyncio.subprocess.Process:
    """Start ``argv``; one with ``--seccomp`` gets its own filter fd, as the sandbox's launch makes it."""
    if "--seccomp" not in argv:
        return await asyncio.create_subprocess_exec(
            *argv, cwd=workspace, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
    fd = seccomp.filter_fd()
    assert fd is not None
    at = argv.index("--seccomp") + 1
    try:
        return await asyncio.create_subprocess_exec(
            *argv[:at],
            str(fd),
            *argv[at + 1 :],
            cwd=workspace,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=(fd,),
        )
    finally:
        os.close(fd)


async def measure(argvs: list[list[str]], workspaces: list[Path], commands: int) -> tuple[float, float]:
    """(commands/s, machine CPU ms per command) running each workspace's argv ``commands`` times."""

    async def one(argv: list[str], workspace: Path, n: int) -> None:
        for _ in range(n):
            process = await spawn(argv, workspace)
            out, err = await process.communicate()
            if out != b"x\n":
                raise SystemExit(f"{argv[0]} printed {out!r}: {err.decode(errors='replace')[-300:]}")

    await asyncio.gather(*(one(a, w, 1) for a, w in zip(argvs, workspaces, strict=True)))  # warm
    with MachineClock() as machine:
        started = time.perf_counter()
        await asyncio.gather(*(one(a, w, commands) for a, w in zip(argvs, workspaces, strict=True)))
        wall = time.perf_counter() - started
    n = commands * len(workspaces)
    return n / wall, (machine.busy or 0.0) * (os.cpu_count() or 1) * wall / n * 1000


def make_workspaces(root: Path, count: int, *, tmpfs: bool, owned: bool) -> list[Path]:
    workspaces = []
    for i in range(count):
        workspace = root / f"w{i}"
        workspace.mkdir()
        if tmpfs and not mount_workspace(workspace, size_mb=64, files=1000):
            raise SystemExit("could not mount a workspace tmpfs (root only)")
        (workspace / "a.txt").write_text("x\n")
        if owned:
            for path in (workspace, workspace / "a.txt"):
                os.chown(path, UID_BASE + i, UID_BASE + i)
        workspaces.append(workspace)
    return workspaces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32, help="workspaces at once (default 32)")
    parser.add_argument("--commands", type=int, default=20, help="commands per workspace (default 20)")
    parser.add_argument("--smoke", action="store_true", help="2 workspaces, 2 commands: it runs")
    args = parser.parse_args()
    concurrency, commands = (2, 2) if args.smoke else (args.concurrency, args.commands)
    root_user = os.geteuid() == 0
    sandbox = default_sandbox()
    if not isinstance(sandbox, BwrapSandbox):
        raise SystemExit(f"the default sandbox here is {sandbox.name}: this script measures bwrap's layers")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"sandbox {sandbox.name}; {concurrency} workspaces at once, {commands} commands each; `{COMMAND}`")
    print(f"cpus: {os.cpu_count()}; {'root' if root_user else 'not root'}; load average before: {load}")
    print(f"{'layer':<20} {'commands/s':>10} {'machine CPU ms/command':>23} {'added':>7}")
    base = Path(tempfile.mkdtemp(prefix="he-launch-cost-"))
    os.chmod(base, 0o755)
    try:
        (base / "plain").mkdir()
        plain = make_workspaces(base / "plain", concurrency, tmpfs=False, owned=root_user)
        runs: list[tuple[str, list[Path]]] = [("", plain)]
        if root_user:
            (base / "tmpfs").mkdir()
            runs.append(
                (", tmpfs each", make_workspaces(base / "tmpfs", concurrency, tmpfs=True, owned=True))
            )
        previous = None
        costs: dict[str, float] = {}
        for suffix, workspaces in runs:
            argvs = [
                layers(sandbox, w, UID_BASE + i if root_user else None) for i, w in enumerate(workspaces)
            ]
            names = list(argvs[0]) if not suffix else ["full"]
            for name in names:
                rate, cost = asyncio.run(measure([a[name] for a in argvs], workspaces, commands))
                against = {"full, inner bwrap": costs.get("outer bwrap")}.get(name, previous)
                if suffix:  # the same command line, on tmpfs workspaces
                    against = costs.get("full")
                added = f"{cost - against:+7.2f}" if against is not None else f"{'':>7}"
                print(f"{name + suffix:<20} {rate:>10.0f} {cost:>23.2f} {added}")
                costs[name] = previous = cost
    finally:
        for path in sorted(base.glob("tmpfs/w*")):
            unmount_workspace(path)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
