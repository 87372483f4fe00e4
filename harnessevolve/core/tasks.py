"""Benchmark tasks: the plain data every stage shares, and loading them from a benchmark folder.

A benchmark is a folder with ``benchmark.yaml`` and ``tasks/*.yaml`` (one task a file, schema
``task.schema.json``). Reference trajectories live in the folder's ``trajectories/`` or, for a
built-in benchmark, in the checkout's ``trajectories/<name>/``.

A task is one or more user turns (``turns``, delivered one at a time, or a simulated ``user``),
a workspace set-up, its own ``tools`` (Python callables, shell commands, MCP servers; layered on
the harness's tools), checks and optional gold calls. The tool-use parts are in ``task_tools.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from harnessevolve.core import paths
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.files import read_yaml
from harnessevolve.core.schema import check
from harnessevolve.core.task_tools import (
    McpServer,
    ObjectSetup,
    SimulatedUser,
    TaskTool,
    load_tool_use,
    python_check,
)

Split = Literal["train", "validation", "test"]
SPLITS: tuple[Split, ...] = ("train", "validation", "test")


@dataclass(frozen=True)
class Check:
    """One checker step: ``answer``, ``file``, ``command``, ``effect``, ``python`` or ``judge`` (see
    task.schema.json)."""

    type: str
    expected: str = ""
    match: str = "exact"
    path: str = ""
    run: str = ""
    mounts: tuple[str, ...] = ()
    """Host paths a ``command`` check reads besides the workspace (its own files, e.g. Harbor's
    ``tests/``): shown read-only at the same paths inside the check's sandbox, nothing else is."""
    python: str = ""
    """``module:function`` of a ``python`` check (it runs in the sandbox)."""
    per_turn: bool = False
    """A ``python`` check scored once per user turn (with that turn's tool state), not at the end."""
    args: dict[str, Any] = field(default_factory=dict)
    """JSON handed to a ``python`` check as ``CheckInput.args``."""
    assertion: str = ""
    """What a ``judge`` check asks its model about the conversation."""
    model: str = ""
    """The litellm model of a ``judge`` check."""


@dataclass(frozen=True)
class GoldCall:
    tool: str
    arguments: dict[str, Any]
    turn: int = 0
    """The user turn (0-based) the call answers; a replay ends each turn before the next one."""


@dataclass(frozen=True)
class Task:
    id: str
    instruction: str
    split: Split
    checks: tuple[Check, ...]
    setup_files: dict[str, str] = field(default_factory=dict)
    setup_commands: tuple[str, ...] = ()
    answer: str | None = None
    gold: tuple[GoldCall, ...] = ()
    tags: tuple[str, ...] = ()
    turns: tuple[str, ...] = ()
    """Every user turn, the first being ``instruction``; empty for a one-turn task."""
    user: SimulatedUser | None = None
    """A simulated user that writes the turns after ``instruction`` (instead of ``turns``)."""
    tools: tuple[TaskTool, ...] = ()
    """The task's own tools, offered next to the harness's (harness edits apply by name)."""
    tool_setup: tuple[ObjectSetup, ...] = ()
    """How the objects behind ``module:Class.method`` tools are made at the start of a rollout."""
    mcp_servers: tuple[McpServer, ...] = ()
    """MCP servers (stdio) whose tools the task offers; they run inside the sandbox."""
    python_path: tuple[str, ...] = ()
    """Absolute folders where the task's Python code (tools, checks) is imported from."""
    read_only_paths: tuple[str, ...] = ()
    """More host paths the rollout's sandbox shows read-only (benchmark.yaml ``sandbox_ro``)."""
    context: str = ""
    """Task-level system context (a policy, a domain's rules): the benchmark's, rendered ahead of
    the harness's own prompt (``system_message``), never editable, counted apart in the prompt budget."""

    def system_message(self, harness_prompt: str) -> str:
        """The rollout's system message: the task's context, then the harness's assembled prompt."""
        return "\n\n".join(part for part in (self.context.strip(), harness_prompt) if part)

    @property
    def opening_text(self) -> str:
        """What the task asks, for demonstrations, proposers and the leakage gate: the instruction,
        or, for a task whose simulated user opens the conversation, that user's ``scenario``
        (``user.instructions`` when it has none; ``opening_in`` prefers what the user said)."""
        if self.instruction:
            return self.instruction
        if self.user is None:
            return ""
        return self.user.scenario or self.user.instructions

    def opening_in(self, reference: Trajectory | None) -> str:
        """``opening_text``, except for a user-opened task without a ``scenario``: the first
        message its simulated user wrote in ``reference`` (what the agent was asked), so that a
        demonstration carries the scenario, not the simulator's whole system prompt."""
        if self.instruction or self.user is None or self.user.scenario or reference is None:
            return self.opening_text
        said = next((s.message for s in reference.steps if s.source == "user" and s.message.strip()), "")
        return said.strip() or self.opening_text

    @property
    def user_turns(self) -> tuple[str, ...]:
        """The scripted user turns: ``turns``, or just the instruction."""
        return self.turns or (self.instruction,)

    @property
    def needs_tool_server(self) -> bool:
        """True when some tool is Python code or comes from an MCP server (a per-rollout server)."""
        return bool(self.mcp_servers) or any(t.python for t in self.tools)


@dataclass(frozen=True)
class Benchmark:
    name: str
    root: Path
    tasks: tuple[Task, ...]
    description: str = ""
    adapter: str = field(default="", compare=False)
    """The adapter that loaded it, ``name@version`` (set by ``load_benchmark_spec``; part of the
    rollout cache key)."""

    @property
    def references_dir(self) -> Path:
        local = self.root / "trajectories"
        return local if local.is_dir() else paths.builtin_dir("trajectories") / self.name

    def split(self, name: Split) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if t.split == name)

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise BenchmarkError(
            f"unknown task {task_id!r}",
            file=str(self.root),
            hint=f"tasks are the files in {self.root / 'tasks'}",
        )


def builtin_benchmarks() -> list[str]:
    root = paths.builtin_dir("benchmarks")
    return sorted(p.name for p in root.iterdir() if (p / "benchmark.yaml").is_file()) if root.is_dir() else []


def resolve_benchmark(name_or_dir: str) -> Path:
    """A built-in benchmark's name or a folder path -> the folder; unknown names are an error."""
    candidate = Path(name_or_dir)
    if (candidate / "benchmark.yaml").is_file():
        return candidate
    builtin = paths.builtin_dir("benchmarks") / name_or_dir
    if "/" not in name_or_dir and (builtin / "benchmark.yaml").is_file():
        return builtin
    known = ", ".join(builtin_benchmarks()) or "none"
    raise BenchmarkError(
        f"unknown benchmark {name_or_dir!r}",
        field="--benchmark",
        hint=f"built-in benchmarks: {known}; or a folder with benchmark.yaml",
    )


def _safe_relative(path: str, *, file: str, field: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise BenchmarkError(f"path {path!r} must stay inside the workspace", file=file, field=field)
    return str(pure)


def gold_calls(doc: dict[str, Any]) -> tuple[GoldCall, ...]:
    """The task's gold solution as tool calls; a ``gold_script`` becomes one bash call per line."""
    if "gold_script" not in doc:
        return tuple(GoldCall(g["tool"], g["arguments"], g.get("turn", 0)) for g in doc.get("gold", []))
    lines = [ln.strip() for ln in doc["gold_script"].splitlines()]
    calls = [GoldCall("bash", {"command": ln}) for ln in lines if ln and not ln.startswith("#")]
    return (*calls, GoldCall("submit", {"answer": doc.get("answer", "done")}))


@dataclass(frozen=True)
class BenchmarkSettings:
    """What ``benchmark.yaml`` says about running its tasks (besides name and description)."""

    python_path: tuple[str, ...] = ()
    read_only_paths: tuple[str, ...] = ()


def load_task(path: Path, settings: BenchmarkSettings | None = None) -> Task:
    if settings is None:  # a task file on its own: its benchmark folder's settings
        settings = _folder_settings(path.parent.parent)
    doc = read_yaml(path, error=BenchmarkError)
    check(doc, "task", file=str(path), error=BenchmarkError)
    if doc["id"] != path.stem:
        raise BenchmarkError(
            f"id {doc['id']!r} differs from the file name",
            file=str(path),
            field="id",
            hint=f"rename the file to {doc['id']}.yaml or change the id",
        )
    setup = doc.get("setup", {})
    files = {
        _safe_relative(k, file=str(path), field=f"setup.files.{k}"): v
        for k, v in setup.get("files", {}).items()
    }
    checks = []
    for i, c in enumerate(doc["checker"]):
        if c["type"] == "file":
            _safe_relative(c["path"], file=str(path), field=f"checker[{i}].path")
        if c["type"] == "python":
            python_check(c["python"], settings.python_path, file=str(path), field=f"checker[{i}].python")
        checks.append(Check(**c))
    tool_use = load_tool_use(doc, settings.python_path, root=path.parent.parent, file=str(path))
    turns = tuple(doc.get("turns", ()))
    instruction = doc.get("instruction") or (turns[0] if turns else "")
    if turns and doc.get("instruction") and turns[0] != doc["instruction"]:
        raise BenchmarkError(
            "instruction differs from turns[0]",
            file=str(path),
            field="instruction",
            hint="with turns, leave instruction out (the first turn is the instruction)",
        )
    if not instruction and tool_use["user"] is None:
        raise BenchmarkError(
            "the task has no user turn",
            file=str(path),
            field="instruction",
            hint="give an instruction, a non-empty turns list, or a simulated user",
        )
    context = _task_context(doc, path)
    gold = gold_calls(doc)
    bad_turn = next((g for g in gold if g.turn >= max(1, len(turns))), None)
    if bad_turn is not None and tool_use["user"] is None:
        raise BenchmarkError(
            f"gold call {bad_turn.tool!r} is for turn {bad_turn.turn}, but the task has "
            f"{max(1, len(turns))} turn(s)",
            file=str(path),
            field="gold",
            hint="turns count from 0",
        )
    return Task(
        id=doc["id"],
        instruction=instruction,
        split=doc["split"],
        checks=tuple(checks),
        setup_files=files,
        setup_commands=tuple(setup.get("commands", [])),
        answer=doc.get("answer"),
        gold=gold,
        tags=tuple(doc.get("tags", [])),
        turns=turns if len(turns) > 1 else (),
        user=tool_use["user"],
        tools=tool_use["tools"],
        tool_setup=tool_use["tool_setup"],
        mcp_servers=tool_use["mcp_servers"],
        python_path=settings.python_path,
        read_only_paths=settings.read_only_paths,
        context=context,
    )


MAX_CONTEXT_CHARS = 200_000
"""A task context longer than this is refused: it would be sent with every model call."""


def _task_context(doc: dict[str, Any], path: Path) -> str:
    """``context`` (text) or ``context_file`` (a file of the benchmark folder, e.g. a shared policy)."""
    if "context_file" not in doc:
        return str(doc.get("context", ""))
    if "context" in doc:
        raise BenchmarkError(
            "context and context_file are both given", file=str(path), field="context_file", hint="keep one"
        )
    root = path.parent.parent
    rel = _safe_relative(doc["context_file"], file=str(path), field="context_file")
    if Path(rel).parts[:1] == ("tasks",):  # where every task lives, held-out ones and their files included
        raise BenchmarkError(
            f"context_file {rel!r} points into tasks/, where the tasks (held-out ones too) are defined",
            file=str(path),
            field="context_file",
            hint="keep shared context (a policy) in its own folder of the benchmark, e.g. policies/",
        )
    source = (root / rel).resolve()
    if not source.is_relative_to(root.resolve()) or not source.is_file():
        raise BenchmarkError(
            f"context_file {rel!r} is not a file of the benchmark folder",
            file=str(path),
            field="context_file",
            hint=f"paths are relative to {root}",
        )
    text = source.read_text(encoding="utf-8", errors="replace")
    if len(text) > MAX_CONTEXT_CHARS:
        raise BenchmarkError(
            f"context_file {rel!r} has {len(text)} chars > {MAX_CONTEXT_CHARS}",
            file=str(path),
            field="context_file",
            hint="a task context is sent with every model call: keep it to the rules the agent needs",
        )
    return text


def load_benchmark(name_or_dir: str) -> Benchmark:
    root = resolve_benchmark(name_or_dir)
    meta_file = root / "benchmark.yaml"
    meta = read_yaml(meta_file, error=BenchmarkError)
    check(meta, "benchmark", file=str(meta_file), error=BenchmarkError)
    task_files = sorted((root / "tasks").glob("*.yaml"))
    if not task_files:
        raise BenchmarkError(
            "benchmark has no tasks", file=str(root / "tasks"), hint="add one tasks/<id>.yaml per task"
        )
    settings = benchmark_settings(meta, root, str(meta_file))
    tasks = tuple(load_task(p, settings) for p in task_files)
    return Benchmark(name=meta["name"], root=root, tasks=tasks, description=meta.get("description", ""))


def benchmark_settings(meta: dict[str, Any], root: Path, file: str) -> BenchmarkSettings:
    """``python_path`` (default: the benchmark folder) and ``sandbox_ro`` of ``benchmark.yaml``, as
    absolute paths; a folder that does not exist is an error."""

    def folders(key: str, default: list[str]) -> tuple[str, ...]:
        out = []
        for i, rel in enumerate(meta.get(key, default)):
            where = (root / rel).resolve()
            if not where.exists():
                raise BenchmarkError(
                    f"{rel!r} does not exist",
                    file=file,
                    field=f"{key}[{i}]",
                    hint=f"paths are relative to {root}",
                )
            out.append(str(where))
        return tuple(out)

    return BenchmarkSettings(
        python_path=folders("python_path", ["."]), read_only_paths=folders("sandbox_ro", [])
    )


def _folder_settings(root: Path) -> BenchmarkSettings:
    meta_file = root / "benchmark.yaml"
    meta = read_yaml(meta_file, error=BenchmarkError) if meta_file.is_file() else {}
    if not isinstance(meta, dict):
        meta = {}
    return benchmark_settings(meta, root, str(meta_file))
