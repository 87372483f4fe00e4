"""Quality gate: the candidate harness is valid, loads, stays inside its editable paths and is not
bloated (``quality_gate``); changed Python compiles and survives a sandboxed smoke run (``code_gate``)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

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
) -> GateVerdict:
    """``model``: the agent model whose tokenizer counts the prompt (default: the harness's)."""
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
    window = rendered_window(harness, model or harness.model)
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
        return GateVerdict(
            "quality",
            False,
            f"prompt overflows the model's window: {window.rendered_tokens} tokens of system prompt and "
            f"tool definitions + {window.reply_tokens} reply > {window.window} of {window.model}",
            numbers,
        )
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
    """The harness's own part of every model call (system prompt and the tool definitions it
    offers, JSON as sent) with the reply it asks for, against the model's context window. A task's
    own context and tools come on top and are the benchmark's (counted apart)."""

    model: str
    rendered_tokens: int
    reply_tokens: int
    window: int | None

    @property
    def over(self) -> bool:
        return self.window is not None and self.rendered_tokens + self.reply_tokens > self.window

    def numbers(self) -> dict[str, Any]:
        return {
            "rendered_tokens": self.rendered_tokens,
            "reply_tokens": self.reply_tokens,
            "context_window": self.window,
        }


def rendered_window(harness: Harness, model: str) -> RenderedWindow:
    tools = json.dumps([t.openai_schema() for t in harness.tools], ensure_ascii=False)
    rendered = measure_tokens(harness.assembled_prompt() + "\n" + tools, model).tokens
    return RenderedWindow(model, rendered, harness.loop.max_tokens or 0, context_window(model))


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
