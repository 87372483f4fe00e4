"""Quality gate: the candidate harness is valid, loads, stays inside its editable paths and is not
bloated (``quality_gate``); changed Python compiles and survives a sandboxed smoke run (``code_gate``)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harnessevolve.core.tasks import Task
from harnessevolve.gate.config import QualityConfig
from harnessevolve.gate.verdict import GateVerdict
from harnessevolve.harness.editable import change_allowed
from harnessevolve.harness.load import load_harness, read_files, validate_harness
from harnessevolve.harness.model import Harness
from harnessevolve.models.tokens import context_window, measure_tokens

EXAMPLE_HEADING = re.compile(r"^## Example\b", re.MULTILINE)


def changed_paths(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def count_examples(text: str) -> int:
    return len(EXAMPLE_HEADING.findall(text))


ESTIMATE_NOTE = " (estimated: no tokenizer for this model)"


def quality_gate(
    candidate_dir: Path,
    before: dict[str, str],
    editable: tuple[str, ...],
    config: QualityConfig,
    *,
    model: str | None = None,
    tasks: Sequence[Task] = (),
) -> GateVerdict:
    """``model``: the agent model whose tokenizer counts the prompt (default: the harness's).
    ``tasks``: the benchmark's; the largest one's context and tools count against the model's
    context window with the harness's prompt and tools (``rendered_window``)."""
    problems = validate_harness(candidate_dir)
    if problems:
        return GateVerdict("quality", False, f"invalid harness: {problems[0]}", {"problems": len(problems)})
    harness = load_harness(candidate_dir)
    changed = changed_paths(before, harness.files)
    forbidden = [p for p in changed if not change_allowed(p, before.get(p), harness.files.get(p), editable)]
    prompt_chars = len(harness.assembled_prompt())
    measured = measure_tokens(harness.assembled_prompt(), model or harness.model)
    prompt_tokens = measured.tokens
    examples_before = sum(count_examples(t) for p, t in before.items() if p.endswith(".md"))
    examples_after = sum(count_examples(t) for p, t in harness.files.items() if p.endswith(".md"))
    window = rendered_window(harness, model or harness.model, tasks)
    numbers = {
        "changed": changed,
        "prompt_chars": prompt_chars,
        "max_prompt_chars": config.max_prompt_chars,
        "prompt_tokens": prompt_tokens,
        "max_prompt_tokens": config.max_prompt_tokens,
        "prompt_tokens_estimated": measured.estimated,
        "new_examples": examples_after - examples_before,
        "max_new_examples": config.max_new_examples,
        **window.numbers(),
    }
    if forbidden:
        return GateVerdict("quality", False, f"edits a path that is not editable: {forbidden[0]}", numbers)
    if prompt_chars > config.max_prompt_chars:
        return GateVerdict(
            "quality", False, f"prompt bloat: {prompt_chars} chars > cap {config.max_prompt_chars}", numbers
        )
    if prompt_tokens > config.max_prompt_tokens:
        return GateVerdict(
            "quality",
            False,
            f"prompt bloat: {prompt_tokens} tokens{ESTIMATE_NOTE if measured.estimated else ''}"
            f" > cap {config.max_prompt_tokens}",
            numbers,
        )
    if window.over:
        return GateVerdict("quality", False, window.reason(), numbers)
    if examples_after - examples_before > config.max_new_examples:
        return GateVerdict(
            "quality",
            False,
            f"adds {examples_after - examples_before} examples > {config.max_new_examples}",
            numbers,
        )
    return GateVerdict("quality", True, "valid, loads, editable paths only, within size caps", numbers)


@dataclass(frozen=True)
class RenderedWindow:
    """What every model call of a rollout sends before its first user message, with the reply it
    asks for, against the model's context window: the harness's own part (system prompt and the
    tool definitions it offers, JSON as sent) and the largest task's part (its ``context`` and the
    tools it adds to the harness's; MCP servers' tools are listed only when a rollout starts and
    are not counted)."""

    model: str
    rendered_tokens: int
    reply_tokens: int
    window: int | None
    task_tokens: int = 0
    """The largest task part of the tasks given (0: none given, or none adds anything)."""
    task_id: str = ""
    """The task it belongs to."""

    @property
    def over(self) -> bool:
        return self.window is not None and self.total > self.window

    @property
    def total(self) -> int:
        return self.rendered_tokens + self.task_tokens + self.reply_tokens

    def reason(self) -> str:
        task = f" + {self.task_tokens} of task {self.task_id}'s context and tools" if self.task_tokens else ""
        return (
            f"prompt overflows the model's window: {self.rendered_tokens} tokens of system prompt and "
            f"tool definitions{task} + {self.reply_tokens} reply > {self.window} of {self.model}"
        )

    def numbers(self) -> dict[str, Any]:
        return {
            "rendered_tokens": self.rendered_tokens,
            "task_tokens": self.task_tokens,
            "largest_task": self.task_id or None,
            "reply_tokens": self.reply_tokens,
            "context_window": self.window,
        }


TASKS_MEASURED = 3
"""How many of the longest task parts (by characters) are measured in tokens for the largest."""


def task_tools(harness: Harness, task: Task) -> list[dict[str, Any]]:
    """A task's tools that the harness does not define, as OpenAI tool specs (a harness tool of the
    same name is offered in their place, and is counted with the harness)."""
    names = {t.name for t in harness.tools}
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in task.tools
        if t.name not in names
    ]


def tools_text(model: str, tools: Sequence[Mapping[str, Any]]) -> str:
    """Tool definitions as the model reads them: the embedded provider (``local/``) writes them into
    the system turn as its tools prompt, one signature line a tool (``tool_text``); an API receives
    the JSON specs."""
    if not tools:
        return ""
    if model.startswith("local/"):
        from harnessevolve.models.tool_text import render_tools_prompt

        return render_tools_prompt(tools)
    return json.dumps(list(tools), ensure_ascii=False)


def task_part(harness: Harness, task: Task, model: str = "") -> str:
    """A task's own part of the system message and tool definitions, as a rollout sends it to
    ``model``: its context, and its tools that the harness does not define."""
    tools = task_tools(harness, task)
    return "\n".join(part for part in (task.context.strip(), tools_text(model, tools)) if part)


def rendered_window(harness: Harness, model: str, tasks: Sequence[Task] = ()) -> RenderedWindow:
    """The harness's part (system prompt, its tools) and the largest task's part in tokens, each as
    the model is sent it. For a local model, whose tools prompt lists the harness's and the task's
    tools together, a task's part is what its context and tools add to the harness's."""
    own = [t.openai_schema() for t in harness.tools]
    prompt = harness.assembled_prompt()
    rendered = measure_tokens(prompt + "\n" + tools_text(model, own), model).tokens
    parts = sorted(((task_part(harness, t, model), t) for t in tasks), key=lambda p: -len(p[0]))
    measured = []
    for text, task in parts[:TASKS_MEASURED]:
        if not text:
            continue
        if model.startswith("local/"):
            whole = "\n".join(
                (task.context.strip(), prompt, tools_text(model, own + task_tools(harness, task)))
            )
            tokens = max(0, measure_tokens(whole, model).tokens - rendered)
        else:
            tokens = measure_tokens(text, model).tokens
        measured.append((tokens, task.id))
    task_tokens, task_id = max(measured, default=(0, ""))
    return RenderedWindow(
        model, rendered, harness.loop.max_tokens or 0, context_window(model), task_tokens, task_id
    )


# --- code: changed Python compiles and survives a sandboxed smoke run -------------------------------

CODE_SMOKE_TIMEOUT_S = 30.0
"""How long the smoke run of changed code may take; past it the candidate is rejected (a hang)."""
TRACEBACK_CHARS = 600


@dataclass(frozen=True)
class SmokeOutcome:
    """What a smoke run of changed code did: exit status (None: killed at the timeout) and output."""

    returncode: int | None
    output: str


class CodeSmoke(Protocol):
    """Runs the smoke script for ``paths`` (changed ``.py`` files of the harness folder
    ``candidate_dir``) in the sandbox, never in this process, killed after ``timeout_s``.

    The pipeline's implementation is ``judging.code_smoke.SandboxedCodeSmoke``: each file is
    loaded as a module (not as ``__main__``, so an agent script's top level runs -- its imports,
    reading the task file, building its client -- but not its loop) in a scratch workspace with
    a task file made from the candidate harness."""

    def __call__(self, candidate_dir: Path, paths: tuple[str, ...], timeout_s: float) -> SmokeOutcome: ...


def changed_python(before: Mapping[str, str], after: Mapping[str, str]) -> tuple[str, ...]:
    """The ``.py`` files an edit created or changed (deleted ones have nothing to run)."""
    return tuple(p for p in changed_paths(dict(before), dict(after)) if p.endswith(".py") and p in after)


def code_gate(
    candidate_dir: Path,
    before: Mapping[str, str],
    smoke: CodeSmoke | None,
    *,
    timeout_s: float = CODE_SMOKE_TIMEOUT_S,
) -> GateVerdict:
    """Part of the quality gate for code edits: every changed Python file compiles (``compile``
    only parses, it runs nothing), then they all pass ``smoke`` within ``timeout_s``. A candidate
    that changes no Python passes at once; ``smoke`` None skips the smoke run (and says so)."""
    after = read_files(candidate_dir)  # not load_harness: this gate must judge code that does not load
    paths = changed_python(before, after)
    numbers: dict[str, Any] = {"python": list(paths), "smoke_timeout_s": timeout_s}
    if not paths:
        return GateVerdict("code", True, "no Python changed", numbers)
    for path in paths:
        try:
            compile(after[path], path, "exec")
        except SyntaxError as exc:
            return GateVerdict(
                "code", False, f"{path} does not compile: {exc.msg} (line {exc.lineno})", numbers
            )
    if smoke is None:
        return GateVerdict("code", True, f"{', '.join(paths)} compile (no smoke run here)", numbers)
    outcome = smoke(candidate_dir, paths, timeout_s)
    numbers["smoke_returncode"] = outcome.returncode
    if outcome.returncode is None:
        return GateVerdict(
            "code", False, f"the smoke run of {', '.join(paths)} did not finish in {timeout_s:g}s", numbers
        )
    if outcome.returncode != 0:
        tail = " ".join(outcome.output.strip().splitlines()[-3:])[-TRACEBACK_CHARS:]
        return GateVerdict(
            "code",
            False,
            f"the smoke run of {', '.join(paths)} failed (exit {outcome.returncode}): {tail}",
            numbers,
        )
    return GateVerdict("code", True, f"{', '.join(paths)} compile and load in the sandbox", numbers)
