"""Harbor / Terminal-Bench task folders, run without Docker.

A suite is a folder of task folders (or one task folder) laid out as Harbor expects::

    <suite>/<task>/instruction.md      what the agent is asked (required)
                   task.toml           timeouts and metadata (read with tomllib; optional here)
                   tests/test.sh       the verifier (required)
                   solution/solve.sh   the reference solution (optional)
                   environment/        Dockerfile and the files it puts in the image (optional)

How each part maps onto a harnessevolve task:

- the workspace gets every file under ``environment/`` except ``Dockerfile``,
  ``docker-compose.y(a)ml`` and ``.dockerignore`` (text files as setup files, binary ones decoded
  from base64 by a setup command, executable bits kept); the Dockerfile is not run;
- the check is one ``command`` check, run in the sandbox like every check (``tests/`` shown
  read-only inside it, nothing else of the host), that, only after the agent has stopped, copies
  ``tests/`` into a fresh temporary folder (so the agent never sees it in its workspace), runs
  ``test.sh`` there with the workspace as the working directory, and passes when
  ``/logs/verifier/reward.txt`` holds a reward of 1 (Harbor rewards are in [0, 1]: 1.5 fails, said on
  stderr) or, when the script writes no reward, when it
  exits 0. ``[verifier] timeout_sec`` bounds it (the checker's own limit still applies);
- ``solution/solve.sh`` becomes the gold solution: one bash call with the whole script (so ``cd``,
  heredocs and functions keep working), then ``submit``; ``harnessevolve refs import`` replays it
  into the reference trajectory;
- Harbor's container paths are mapped onto the workspace: ``/app`` (the usual ``WORKDIR``) becomes
  the workspace in instruction.md, solve.sh and the tests, ``/tests`` the copied tests folder and
  ``/logs/...`` a scratch folder beside it (the verifier sees ``APP_DIR``, ``TESTS_DIR`` and
  ``LOGS_DIR`` too);
- splits come from ``[metadata] split`` when a task gives one, else from ``suite.assign_splits``;
  tags are ``[metadata] category`` (first: proposers group tasks by it), ``difficulty-<d>``, then
  ``[metadata] tags`` and ``[task] keywords``;
- reference trajectories live in ``<suite>/trajectories/`` (a folder without instruction.md is
  not a task).
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import re
import shlex
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harnessevolve.adapters.suite import AdaptedBenchmark, assign_splits, task_id_from
from harnessevolve.core import paths
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import SPLITS, Check, GoldCall, Split, Task

DOCKER_ONLY = frozenset({"Dockerfile", "docker-compose.yaml", "docker-compose.yml", ".dockerignore"})
MAX_ENVIRONMENT_BYTES = 5_000_000
"""Files under environment/ are copied into every workspace; more than this is refused."""
DEFAULT_VERIFIER_TIMEOUT_S = 120.0
_APP_PATH = re.compile(r"(?<![\w./-])/app(?=/|\b|$)")
HINT = "a Harbor task is a folder with instruction.md, task.toml, tests/test.sh and solution/solve.sh"

# The verifier, run by the `command` check in the workspace. @TESTS@ / @TIMEOUT@ / @HEADER@ are filled
# in per task. sed maps Harbor's container paths (/app, /tests, /logs) onto the folders used here.
_VERIFIER = r"""@HEADER@
he_app="$PWD"
he_tmp="$(mktemp -d "${TMPDIR:-/tmp}/he-harbor-XXXXXX")" || exit 97
trap 'rm -rf "$he_tmp"' EXIT
cp -R @TESTS@ "$he_tmp/tests" && mkdir -p "$he_tmp/logs/verifier" || exit 97
export TESTS_DIR="$he_tmp/tests" LOGS_DIR="$he_tmp/logs" APP_DIR="$he_app"
find "$TESTS_DIR" -type f -print0 | xargs -0 -r grep -IlZ -e /app -e /tests -e /logs/ \
  | xargs -0 -r sed -i -E -e "s#(^|[^[:alnum:]_./-])/logs/#\1$LOGS_DIR/#g" \
    -e "s#(^|[^[:alnum:]_./-])/tests(/|\b|\$)#\1$TESTS_DIR\2#g" \
    -e "s#(^|[^[:alnum:]_./-])/app(/|\b|\$)#\1$APP_DIR\2#g"
timeout -k 5 @TIMEOUT@ bash "$TESTS_DIR/test.sh"
he_rc=$?
if [ -s "$LOGS_DIR/verifier/reward.txt" ]; then
  awk 'NR == 1 { r = $1 + 0
    if (r < 0 || r > 1) { print "harbor reward " $1 " is outside [0, 1]: not a pass" > "/dev/stderr"; exit 3 }
    exit !(r >= 1) }' "$LOGS_DIR/verifier/reward.txt"
  exit $?
fi
exit $he_rc
"""


def is_task_dir(path: Path) -> bool:
    return (path / "instruction.md").is_file()


def map_app_path(text: str) -> str:
    """Harbor's ``/app`` working directory -> the workspace (``.``): ``/app/out.txt`` -> ``./out.txt``."""
    return _APP_PATH.sub(".", text)


def is_suite_dir(path: Path) -> bool:
    return path.is_dir() and (is_task_dir(path) or any(c.is_dir() and is_task_dir(c) for c in path.iterdir()))


def builtin_suites() -> list[str]:
    """Harbor suites shipped in the checkout's benchmarks/ (``harbor-example``), usable by name."""
    root = paths.builtin_dir("benchmarks")
    return sorted(p.name for p in root.iterdir() if is_suite_dir(p)) if root.is_dir() else []


def suite_path(spec: str) -> Path:
    """A folder, or the name of a built-in suite."""
    path = Path(spec)
    if not path.exists() and spec in builtin_suites():
        return paths.builtin_dir("benchmarks") / spec
    return path


class HarborAdapter:
    """``harbor:PATH``, or any folder holding Harbor task folders (or one task folder), or the name
    of a built-in suite (``harbor-example``)."""

    name = "harbor"

    def detect(self, spec: str) -> bool:
        return is_suite_dir(suite_path(spec))

    def load(self, spec: str) -> AdaptedBenchmark:
        if not spec:
            raise BenchmarkError("harbor: needs a folder", field="--benchmark", hint="use harbor:PATH")
        return load_harbor_suite(suite_path(spec))


@dataclass(frozen=True)
class _Parsed:
    task_id: str
    split: Split | None
    task: Task


def load_harbor_suite(root: Path) -> AdaptedBenchmark:
    if not root.is_dir():
        raise BenchmarkError(f"no Harbor suite at {root}", file=str(root), hint=HINT)
    folders = (
        [root] if is_task_dir(root) else sorted(c for c in root.iterdir() if c.is_dir() and is_task_dir(c))
    )
    if not folders:
        raise BenchmarkError("no Harbor tasks in this folder", file=str(root), hint=HINT)
    parsed: list[_Parsed] = []
    seen: dict[str, Path] = {}
    for folder in folders:
        item = read_task(folder)
        if item.task_id in seen:
            raise BenchmarkError(
                f"task id {item.task_id!r} also comes from {seen[item.task_id]}",
                file=str(folder),
                hint="rename one of the folders",
            )
        seen[item.task_id] = folder
        parsed.append(item)
    splits = assign_splits([p.task_id for p in parsed], {p.task_id: p.split for p in parsed if p.split})
    tasks = tuple(replace(p.task, split=splits[p.task_id]) for p in parsed)
    name = task_id_from(root.resolve().name, file=str(root))
    return AdaptedBenchmark(
        name=name,
        root=root,
        tasks=tasks,
        description=f"Harbor suite {root} ({len(tasks)} tasks)",
        references=root / "trajectories",
        source=f"harbor:{root}",
    )


def read_task(folder: Path) -> _Parsed:
    task_id = task_id_from(folder.name, file=str(folder))
    config = _read_config(folder / "task.toml")
    instruction = _read_text(folder / "instruction.md").strip()
    if not instruction:
        raise BenchmarkError("instruction.md is empty", file=str(folder / "instruction.md"), hint=HINT)
    tests = folder / "tests"
    if not (tests / "test.sh").is_file():
        raise BenchmarkError("no tests/test.sh: nothing can score this task", file=str(tests), hint=HINT)
    metadata: dict[str, Any] = config.get("metadata", {})
    split = metadata.get("split")
    if split is not None and split not in SPLITS:
        raise BenchmarkError(
            f"split {split!r} is not one of {', '.join(SPLITS)}",
            file=str(folder / "task.toml"),
            field="metadata.split",
        )
    timeout = _verifier_timeout(config, folder / "task.toml")
    files, commands = environment_setup(folder / "environment")
    task = Task(
        id=task_id,
        instruction=map_app_path(instruction),
        split=split or "train",
        checks=(
            Check(
                type="command",
                run=verifier_command(task_id, tests, timeout),
                mounts=(str(tests.resolve()),),
            ),
        ),
        setup_files=files,
        setup_commands=commands,
        gold=gold_from_script(folder / "solution" / "solve.sh"),
        tags=_tags(config),
    )
    return _Parsed(task_id=task_id, split=split, task=task)


def _verifier_timeout(config: dict[str, Any], path: Path) -> float:
    """``[verifier] timeout_sec``: a finite number of seconds > 0 (a task that can never pass is refused)."""
    verifier = config.get("verifier", {})
    value = verifier.get("timeout_sec", DEFAULT_VERIFIER_TIMEOUT_S) if isinstance(verifier, dict) else None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise BenchmarkError(
            f"timeout_sec must be a positive number of seconds, not {value!r}",
            file=str(path),
            field="verifier.timeout_sec",
            hint="e.g. timeout_sec = 120.0",
        )
    return float(value)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchmarkError(f"cannot read it as UTF-8 text: {exc}", file=str(path), hint=HINT) from None


def _read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise BenchmarkError(f"not valid TOML: {exc}", file=str(path), hint=HINT) from None


def _tags(config: dict[str, Any]) -> tuple[str, ...]:
    metadata, section = config.get("metadata", {}), config.get("task", {})
    tags = [str(metadata.get("category") or "harbor")]
    if metadata.get("difficulty"):
        tags.append(f"difficulty-{metadata['difficulty']}")
    for tag in [*metadata.get("tags", []), *section.get("keywords", [])]:
        if str(tag) not in tags:
            tags.append(str(tag))
    return tuple(tags)


def tests_digest(tests: Path) -> str:
    """A hash of every file under tests/, so editing the verifier changes the task's fingerprint."""
    digest = hashlib.sha256()
    for path in sorted(p for p in tests.rglob("*") if p.is_file()):
        digest.update(path.relative_to(tests).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def verifier_command(task_id: str, tests: Path, timeout_s: float) -> str:
    header = f"# harbor verifier: {task_id}/tests/test.sh (tests sha256 {tests_digest(tests)})"
    return (
        _VERIFIER.replace("@HEADER@", header)
        .replace("@TESTS@", shlex.quote(str(tests.resolve())))
        .replace("@TIMEOUT@", f"{timeout_s:g}")
    )


def gold_from_script(path: Path) -> tuple[GoldCall, ...]:
    """solve.sh as one bash call (shebang dropped, /app mapped), then submit; none without solve.sh."""
    if not path.is_file():
        return ()
    lines = _read_text(path).splitlines()
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    kept = [ln for ln in map_app_path("\n".join(lines)).splitlines() if ln.strip() != "cd ."]
    script = "\n".join(kept).strip()
    if not script:
        return ()
    return (GoldCall("bash", {"command": script}), GoldCall("submit", {"answer": "done"}))


def environment_setup(env_dir: Path) -> tuple[dict[str, str], tuple[str, ...]]:
    """The files under environment/ (Docker files left out) as setup files and commands."""
    if not env_dir.is_dir():
        return {}, ()
    files: dict[str, str] = {}
    commands: list[str] = []
    executables: list[str] = []
    total = 0
    for path in sorted(p for p in env_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(env_dir).as_posix()
        if rel in DOCKER_ONLY:
            continue
        data = path.read_bytes()
        total += len(data)
        if total > MAX_ENVIRONMENT_BYTES:
            raise BenchmarkError(
                f"environment/ holds more than {MAX_ENVIRONMENT_BYTES} bytes",
                file=str(env_dir),
                hint="every workspace gets a copy; keep large data out of the task folder",
            )
        try:
            files[rel] = data.decode("utf-8")
        except UnicodeDecodeError:
            quoted = shlex.quote(rel)
            encoded = base64.b64encode(data).decode()
            commands.append(
                f"mkdir -p \"$(dirname {quoted})\" && base64 -d > {quoted} <<'HE_EOF'\n{encoded}\nHE_EOF"
            )
        if os.access(path, os.X_OK):
            executables.append(shlex.quote(rel))
    if executables:
        commands.append("chmod +x " + " ".join(executables))
    return files, tuple(commands)
