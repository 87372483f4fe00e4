"""Floods against the whole-rollout limits, each in a fresh workspace through the real bash tool.

    .venv/bin/python benchmarks/perf/rollout_limits.py [--limits rollout_memory_mb=2048,...]

Four floods, each staying under every per-process limit so that only the rollout limits can stop
it: six processes of 500 MiB (memory), twenty 60 MiB files (workspace size), 120000 empty files
(workspace file count), 400 background processes (process count). Printed per flood: the wall
time, the rollout cgroup's peak memory, the tool error and the last lines of the result (the
``[rollout limit: ...]`` line says which limit stopped it). Also how this machine enforces them
(cgroup v2 / v1 / none; workspace tmpfs or not). See docs/threat-model.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from harnessevolve.core.tasks import Check, Task
from harnessevolve.execute.tools import run_shell
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.sandbox.base import BwrapSandbox, SandboxLimits
from harnessevolve.sandbox.launch import workspace_cgroup
from harnessevolve.sandbox.limits import cgroup_mode, is_workspace_mount

HOLD = (
    "import time; x = bytearray(500 * 1024**2); x[::4096] = b'y' * len(x[::4096]); "
    "print('held', flush=True); time.sleep(5)"
)
FLOODS = {
    "memory: 6 x 500 MiB": f'for i in 1 2 3 4 5 6; do python3 -c "{HOLD}" & done; wait; echo over',
    "disk: 20 x 60 MiB": (
        "for i in $(seq 1 20); do head -c 60M /dev/zero > f$i || { echo write $i failed; break; }; done; "
        "echo used $(du -sm . | cut -f1) MiB"
    ),
    "inodes: 120000 files": (
        "for i in $(seq 1 120000); do : > f$i || { echo create $i failed; break; }; done; "
        "echo $(ls | wc -l) files"
    ),
    "processes: 400": "for i in $(seq 1 400); do sleep 5 & done; echo started; wait",
}
SMOKE_FLOODS = {  # the same path, far under every limit: seconds
    "disk: 2 x 1 MiB": "for i in 1 2; do head -c 1M /dev/zero > f$i; done; du -sm .",
    "processes: 20": "for i in $(seq 1 20); do sleep 0.1 & done; echo started; wait",
}
TASK = Task(id="flood", instruction="", split="train", checks=(Check(type="answer", expected="x"),))


async def flood(name: str, command: str, sandbox: BwrapSandbox) -> None:
    workspace = await create_workspace(TASK, sandbox=sandbox)
    try:
        started = time.monotonic()
        result = await run_shell(command, workspace, timeout_s=120, limit=4000, sandbox=sandbox)
        took = time.monotonic() - started
        cgroup = workspace_cgroup(workspace)
        peak = cgroup.peak_mb() if cgroup else None
        tail = [line for line in result.output.strip().splitlines() if line.strip()][-3:]
        shown = "unknown" if peak is None else f"{peak:.1f} MiB"
        lines = result.output.splitlines()
        counts = f"held {lines.count('held')}, killed {sum('Killed' in line for line in lines)}"
        print(f"== {name}: {took:.1f} s, peak {shown}, {counts}, error={result.error}")
        for line in tail:
            print(f"   {line[:150]}")
    finally:
        remove_workspace(workspace)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", default="", help="--sandbox-limits style overrides")
    parser.add_argument("--only", action="append", help="run only floods whose name starts with this")
    parser.add_argument("--smoke", action="store_true", help="two small floods under every limit: it runs")
    args = parser.parse_args()
    floods = SMOKE_FLOODS if args.smoke else FLOODS
    limits = SandboxLimits.parse(args.limits)
    sandbox = BwrapSandbox(limits)
    probe = await create_workspace(TASK, sandbox=sandbox)
    tmpfs = is_workspace_mount(probe)
    remove_workspace(probe)
    print(f"uid {os.geteuid()}; rollout cgroup: {cgroup_mode()}; workspace tmpfs: {tmpfs}; {limits}")
    for name, command in floods.items():
        if not args.only or any(name.startswith(o) for o in args.only):
            await flood(name, command, sandbox)


if __name__ == "__main__":
    asyncio.run(main())
