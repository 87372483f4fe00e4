"""When two calls that differ as text do the same thing: effect-aware matching for alignment.

Two calls match by **effect** when

- both pass code as an argument (a ``command``, ``cmd``, ``script`` or ``code`` string: a shell
  command, a program), where the text says little about what the call does, and their
  observations are the same and say something (``same_observation``): equal after
  whitespace and exit-status lines are normalised, neither reports an error, and the text is
  *informative*: not empty, not a bare status (``ok``, ``true``, ``None``, ``{}``, a JSON object
  of flags only). Commands that change files usually print nothing, so an empty observation never
  matches: two silent ``mv`` calls may have moved different files. Calls with structured
  arguments are not matched this way: there the schema says which arguments matter, and an
  argument that did not change this observation (``ls(a=True)`` in a folder without hidden files)
  may still change the next;
- or an **effect oracle** says so: a callable the caller passes (``EffectOracle``) that knows how to
  re-run both calls and compare what they did. ``effect_check.effect_oracle`` is the one for tasks
  with an ``effect`` check: it runs both commands in fresh copies of the task's set-up (after the
  reference's earlier shell commands) and compares stdout, exit status and files.

Calls equal under the tool's schema (``call_match``) already match; this is only asked when they
are not. Finishes are never matched here: a submitted answer is judged by the task's checker.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from harnessevolve.evaluate.actions import Action
from harnessevolve.evaluate.observations import tool_error

EffectOracle = Callable[[Action, Action, Sequence[Action]], bool | None]
"""``oracle(run_call, reference_call, reference_calls_before)``: True when the two calls have the
same effect, False when they do not, None when it cannot tell (not a call it knows how to run)."""

SHELL_TOOLS = frozenset({"bash", "shell", "sh", "run", "execute", "terminal", "run_command", "exec"})
COMMAND_KEYS = ("command", "cmd", "script")
CODE_KEYS = (*COMMAND_KEYS, "code")
MIN_INFORMATIVE_CHARS = 3
_STATUS_ONLY = frozenset(
    {"", "ok", "okay", "done", "true", "false", "none", "null", "success", "succeeded", "{}", "[]", '""'}
)
_EXIT_LINE = re.compile(
    r"^\s*\[?(?:exit(?:ed)?[ _-]?(?:code|status)|return[ _-]?code)\s*[:=]?\s*0\]?\s*$", re.I | re.M
)


def shell_command(action: Action) -> str | None:
    """The command string of a shell-tool call (``bash(command=...)``), or None."""
    if action.tool is None or action.is_finish or action.tool.lower() not in SHELL_TOOLS:
        return None
    return _first_text(action, COMMAND_KEYS)


def code_argument(action: Action) -> str | None:
    """The code a call passes (its ``command``/``cmd``/``script``/``code`` string), or None."""
    if action.tool is None or action.is_finish:
        return None
    return _first_text(action, CODE_KEYS)


def _first_text(action: Action, keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` whose argument is a string that is not blank, or None."""
    for key in keys:
        value = action.arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def normalised_observation(text: str | None) -> str:
    """The observation with exit-status-0 lines dropped and whitespace collapsed per line."""
    if not text:
        return ""
    kept = _EXIT_LINE.sub("", text)
    lines = (" ".join(line.split()) for line in kept.splitlines())
    return "\n".join(line for line in lines if line)


def informative(text: str) -> bool:
    """Whether a (normalised) observation says more than that the call ran."""
    if len(text.strip()) < MIN_INFORMATIVE_CHARS or text.strip().lower() in _STATUS_ONLY:
        return False
    if text[:1] in "{[":
        try:
            doc: Any = json.loads(text)
        except ValueError:
            return True
        return _has_content(doc)
    return True


def _has_content(doc: Any) -> bool:
    if isinstance(doc, dict):
        return any(_has_content(v) for v in doc.values())
    if isinstance(doc, list):
        return any(_has_content(v) for v in doc)
    if isinstance(doc, bool) or doc is None:
        return False
    return str(doc).strip().lower() not in _STATUS_ONLY


def same_observation(run: Action, ref: Action) -> bool:
    """Both calls ran without error and observed the same informative text (see the module docstring)."""
    if code_argument(run) is None or code_argument(ref) is None:
        return False
    if run.observation is None or ref.observation is None or run.error or ref.error:
        return False
    if tool_error(run.observation) or tool_error(ref.observation):
        return False
    a, b = normalised_observation(run.observation), normalised_observation(ref.observation)
    return a == b and informative(a)
