"""NL2Bash tasks from the PyPI package ``icalfa`` (InterCode-ALFA), run without Docker.

``icalfa`` ships 300 tasks in ``icalfa/assets/datasets/nl2bash_fs_<n>.json`` (``query``, ``gold``
bash command, ``gold2`` alternative, ``difficulty``) over five file systems, each built by
``icalfa/assets/docker/setup_nl2b_fs_<n>.sh`` in a container whose working directory is ``/``.
Here the workspace stands for that ``/``:

- the setup script runs in the workspace with its roots (``/testbed``, ``/system``, ``/workspace``,
  ``/backup``) made relative, and the workspace also holds the unmodified script itself, as the
  image does (some queries read it);
- the same mapping turns ``/testbed/x`` into ``testbed/x`` in the query and the gold command;
- the agent runs its command and submits it; one ``effect`` check runs the submitted command and
  the gold one in two fresh, identically built workspaces and passes when their stdout (workspace
  paths masked), success and resulting files (paths, kinds, modes, contents) match
  (``evaluate/checkers.py``);
- the gold solution is that command as one bash call, then ``submit`` with it, which
  ``harnessevolve refs import`` replays into the reference trajectory; those replays are shipped
  in ``trajectories/nl2bash/`` (one folder for every subset: task ids are unique across them),
  each one checked by the task's own effect check before it was written;
- ``gold2`` is not used; splits come from ``suite.assign_splits`` (icalfa has none); tags are
  ``nl2bash-fs<n>`` and ``difficulty-<d>``.

Which tasks: ``nl2bash`` (or ``nl2bash:``) is every task whose gold command stays inside the
workspace, gives the same result twice (no output process substitution ``>(...)``, whose
output races the command's own) and is not passed by a command that does nothing
(``NULL_PASSED_TASKS``); ``nl2bash:5`` or ``nl2bash:1,3`` only those file
systems; ``nl2bash:all`` all 300, including commands that read or change the host (network,
processes, clock, paths outside the workspace) -- only behind a sandbox.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import replace
from pathlib import Path

from harnessevolve.adapters.suite import AdaptedBenchmark, assign_splits
from harnessevolve.core import paths
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import Check, GoldCall, Task

FILESYSTEMS = (1, 2, 3, 4, 5)
INSTALL_HINT = "pip install 'harnessevolve[nl2bash]'  (icalfa==0.3.6)"
INSTRUCTION = (
    "{query}\n\nWork in the current directory. Run one bash command that does this, then call submit "
    "with that exact command as the answer."
)
_ROOTS = re.compile(r"(?<![\w./~-])/(testbed|system|workspace|backup)(?=[/\s'\")|;&]|$)")
_SETUP_ONLY = re.compile(r"(?<![\w./~-])/(index\.html)\b")
# An absolute path left after mapping the roots (not /dev/null, /bin/x, /usr/bin/x): the host's.
_HOST_PATH = re.compile(r"(?:^|(?<=[\s'\"=(|;`@#:,]))/(?!dev/null|dev/zero|bin/|usr/bin/)(?:[\w.]|\s|$)")
_WORDS = re.compile(r"(?:^|[|;&(`]|\$\(|&&|\|\|)\s*([\w.-]+)")
HOST_COMMANDS = frozenset(
    ("apt", "bind", "cal", "crontab", "curl", "date", "df", "dig", "dpkg", "env", "free", "getent")
    + ("history", "hostname", "ifconfig", "jobs", "last", "locale", "lsblk", "lscpu", "lsmem", "lsof")
    + ("netstat", "nslookup", "openssl", "ping", "ps", "pstree", "route", "service", "ssh", "swapon")
    + ("sysctl", "top", "uptime", "vmstat", "w", "wall", "wget", "who")
)
"""Commands whose output depends on the host, the network or the clock, not on the workspace."""
_OUTPUT_SUBSTITUTION = re.compile(r">\(")
"""``tee >(wc -l)``: the substituted process writes when it gets to it, before or after the
command's own output (or after the shell exits), so two runs of the same command differ."""
UNSTABLE_TASKS = frozenset({"fs1-041", "fs1-085"})  # stat (inode, change time); getconf -a
"""Workspace-only tasks whose gold command still gives different results in two identical
workspaces (found by running every gold command against itself; see tests/adapters)."""
NULL_PASSED_TASKS = frozenset(
    # the gold's effect is nothing: `true` has it (finds that match no file, rmdir of nothing)
    {"fs1-060", "fs1-099", "fs2-006", "fs2-007", "fs2-012", "fs3-002", "fs3-003", "fs3-046", "fs5-004"}
    # the gold fails in the sandbox (no `tree`, no chown/chgrp, a missing file): `false` has its effect
    | {"fs1-006", "fs1-010", "fs1-011", "fs1-057", "fs1-062", "fs1-063", "fs1-064", "fs1-091", "fs2-002"}
    | {"fs2-003", "fs2-023", "fs2-040", "fs3-035", "fs3-052"}
)
"""Workspace-only tasks that a command doing nothing passes (``true`` or ``false`` submitted): a
null agent scores on them, so they measure nothing (found by submitting both against every task;
see tests/adapters). ``nl2bash:all`` keeps them."""


class NL2BashAdapter:
    """``nl2bash[:SUBSET]``: NL2Bash tasks from icalfa (see the module docstring)."""

    name = "nl2bash"

    def detect(self, spec: str) -> bool:
        return False  # only ever by name: `nl2bash` or `nl2bash:SUBSET`

    def load(self, spec: str) -> AdaptedBenchmark:
        return load_nl2bash(spec)


def icalfa_assets() -> Path:
    """``icalfa/assets`` in site-packages, found without importing icalfa (it pulls docker, openai)."""
    spec = importlib.util.find_spec("icalfa")
    if spec is None or not spec.submodule_search_locations:
        raise BenchmarkError("the nl2bash benchmark needs the icalfa package", hint=INSTALL_HINT)
    assets = Path(next(iter(spec.submodule_search_locations))) / "assets"
    if not (assets / "datasets").is_dir():
        raise BenchmarkError("icalfa has no assets/datasets folder", file=str(assets), hint=INSTALL_HINT)
    return assets


def map_roots(text: str) -> str:
    """``/testbed/x`` -> ``testbed/x`` (and the other file-system roots): the workspace is ``/``."""
    return _ROOTS.sub(r"\1", text)


def touches_host(command: str) -> bool:
    """Whether a (mapped) command reads or changes anything outside the workspace."""
    if _HOST_PATH.search(command) or "$$" in command:
        return True
    return any(word in HOST_COMMANDS for word in _WORDS.findall(command))


def parse_subset(subset: str) -> tuple[tuple[int, ...], bool]:
    """``""`` -> all file systems, workspace-only; ``"1,5"`` / ``"fs5"`` -> those; ``"all"`` -> everything."""
    text = subset.strip().lower()
    if text in ("", "nl2bash"):
        return FILESYSTEMS, False
    if text == "all":
        return FILESYSTEMS, True
    chosen: list[int] = []
    for part in text.split(","):
        digits = part.strip().removeprefix("fs")
        if not digits.isdigit() or int(digits) not in FILESYSTEMS:
            raise BenchmarkError(
                f"unknown NL2Bash subset {subset!r}",
                field="--benchmark",
                hint="use nl2bash, nl2bash:all, or file systems 1-5 such as nl2bash:5 or nl2bash:1,3",
            )
        if int(digits) not in chosen:
            chosen.append(int(digits))
    return tuple(sorted(chosen)), False


def benchmark_name(filesystems: tuple[int, ...], everything: bool) -> str:
    if everything:
        return "nl2bash-all"
    if filesystems == FILESYSTEMS:
        return "nl2bash"
    return "nl2bash-" + "-".join(f"fs{n}" for n in filesystems)


def load_nl2bash(subset: str = "") -> AdaptedBenchmark:
    filesystems, everything = parse_subset(subset)
    assets = icalfa_assets()
    tasks: list[Task] = []
    for n in filesystems:
        tasks += _filesystem_tasks(assets, n, everything)
    splits = assign_splits([t.id for t in tasks])
    name = benchmark_name(filesystems, everything)
    return AdaptedBenchmark(
        name=name,
        root=assets / "datasets",
        tasks=tuple(replace(t, split=splits[t.id]) for t in tasks),
        description=f"NL2Bash (icalfa), file systems {','.join(map(str, filesystems))}: {len(tasks)} tasks",
        references=paths.builtin_dir("trajectories") / "nl2bash",
        source=f"nl2bash:{subset}",
        shared_references=True,
    )


def _filesystem_tasks(assets: Path, n: int, everything: bool) -> list[Task]:
    data_file = assets / "datasets" / f"nl2bash_fs_{n}.json"
    script_file = assets / "docker" / f"setup_nl2b_fs_{n}.sh"
    try:
        records = json.loads(data_file.read_text(encoding="utf-8"))
        script = script_file.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise BenchmarkError(
            f"cannot read icalfa's data: {exc}", file=str(data_file), hint=INSTALL_HINT
        ) from None
    setup = _SETUP_ONLY.sub(r"\1", map_roots(script)) + "\nexit 0\n"
    tasks = []
    for i, record in enumerate(records):
        task_id = f"fs{n}-{i:03d}"
        gold = map_roots(str(record["gold"])).strip()
        unstable = task_id in UNSTABLE_TASKS or _OUTPUT_SUBSTITUTION.search(gold) is not None
        if not everything and (touches_host(gold) or unstable or task_id in NULL_PASSED_TASKS):
            continue
        tasks.append(
            Task(
                id=task_id,
                instruction=INSTRUCTION.format(query=map_roots(str(record["query"])).strip()),
                split="train",
                checks=(Check(type="effect", run=gold),),
                setup_files={script_file.name: script},
                setup_commands=(setup,),
                answer=gold,
                gold=(GoldCall("bash", {"command": gold}), GoldCall("submit", {"answer": gold})),
                tags=(f"nl2bash-fs{n}", f"difficulty-{record.get('difficulty', 0)}"),
            )
        )
    return tasks
