"""``loop.check_writes``: after each ``write_file`` call, check what it wrote.

Small agents write a file and finish without ever running it: a file that ends inside a string, a
JSON document with a stray comma, a shell script with an unclosed ``if``, or the file they were
given written back unchanged. The check looks at the file the call wrote, by its suffix, and puts a
note under the tool's result when

- it does not parse: Python (``ast.parse``: nothing of it runs), JSON, TOML, or a shell script
  (``bash -n``), with the parser's own message and line;
- it is Python that parses but has a function with no code: a body of only a docstring, ``pass``
  or ``...`` (a stub written back as it was given);
- it already held exactly that content (nothing changed).

A file of any other suffix is only checked for being unchanged. The parsers run in the rollout's
sandbox, like the agent's own commands (the file is the agent's, so is everything that reads it),
with a short time limit; a checker that is missing there, or fails in any other way, adds nothing.
Nothing here names a benchmark, a task or a language beyond the suffixes above. The loop records
each note in the rollout's ``extra.check_writes`` (``{"path", "note"}``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harnessevolve.execute.tools import ToolResult, read_workspace_file, run_shell, truncate
from harnessevolve.harness.model import ToolSpec
from harnessevolve.sandbox.base import Sandbox

NOTE_CHARS = 600
"""Longest parser message kept in a note."""
TIME_LIMIT_S = 10.0
"""Wall-clock limit of one check (shorter when the loop's command limit is)."""
NOT_PARSED = "NOT PARSED"
NO_BODY = "NO BODY"

_PARSE = r"""
import os, sys
path = os.environ["HE_CHECK_PATH"]
suffix = os.path.splitext(path)[1].lower()
try:
    data = open(path, "rb").read()
    if suffix == ".py":
        import ast
        stubs = [
            f"{node.name} (line {node.lineno})"
            for node in ast.walk(ast.parse(data, path))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and all(
                isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
                for s in node.body
            )
        ]
        if stubs:
            print("NO BODY")
            print(", ".join(stubs[:5]))
    elif suffix == ".json":
        import json
        json.loads(data)
    elif suffix == ".toml":
        import tomllib
        tomllib.loads(data.decode("utf-8"))
except SyntaxError as exc:
    text = (exc.text or "").strip()
    print("NOT PARSED")
    print(f"line {exc.lineno}: {exc.msg}" + (f"\n    {text[:200]}" if text else ""))
except ValueError as exc:
    print("NOT PARSED")
    print(str(exc)[:400])
except BaseException:
    pass
"""

_COMMAND = (
    'case "$HE_CHECK_PATH" in\n'
    '  *.sh|*.bash) out=$(bash -n -- "$HE_CHECK_PATH" 2>&1) || printf "NOT PARSED\\n%s\\n" "$out" ;;\n'
    '  *.py|*.json|*.toml) python3 -I -S -c "$HE_CHECK_PARSE" 2>/dev/null ;;\n'
    "esac\n"
    "exit 0\n"
)

LANGUAGES = {".py": "Python", ".json": "JSON", ".toml": "TOML", ".sh": "shell", ".bash": "shell"}
"""Suffixes whose files are parsed, and the name the note gives their language."""


def is_write(spec: ToolSpec) -> bool:
    """Whether a tool is the built-in ``write_file`` (the one tool whose writes are checked)."""
    return spec.builtin == "write_file"


def content_before(workspace: Path, arguments: dict[str, Any]) -> bytes | None:
    """What the file a ``write_file`` call names holds now (None: absent, refused, or larger than
    what the call writes, so it cannot be the same)."""
    content = str(arguments.get("content", "")).encode()
    try:
        held = read_workspace_file(workspace, str(arguments.get("path", "")), len(content) + 1)
    except (OSError, ValueError):
        return None
    return held if len(held) <= len(content) else None


async def check_write(
    arguments: dict[str, Any],
    workspace: Path,
    result: ToolResult,
    before: bytes | None,
    *,
    timeout_s: float,
    sandbox: Sandbox | None,
) -> ToolResult:
    """``result`` of a ``write_file`` call with the check's note added (unchanged when the write
    failed or the file is fine)."""
    if result.error is not None:
        return result
    path = str(arguments.get("path", ""))
    notes = []
    if before is not None and before == str(arguments.get("content", "")).encode():
        notes.append(f"note: {path} already held exactly this content; the write changed nothing.")
    language = LANGUAGES.get(Path(path).suffix.lower())
    if language is not None:
        found = await _parse(path, workspace, timeout_s=timeout_s, sandbox=sandbox)
        if found is not None:
            said, message = found
            notes.append(f"note: {path} {said.format(language=language)}:\n{message}")
    if not notes:
        return result
    note = "\n".join(notes)
    return ToolResult(f"{result.output}\n{note}", result.error, result.submitted, note)


def record(rollout: Any, arguments: dict[str, Any], result: ToolResult) -> None:
    """Keep a check's note in the rollout's ``extra.check_writes`` (nothing when there is none)."""
    if result.note:
        entry = {"path": str(arguments.get("path", ""))[:200], "note": result.note}
        rollout.extra.setdefault("check_writes", []).append(entry)


async def _parse(
    path: str, workspace: Path, *, timeout_s: float, sandbox: Sandbox | None
) -> tuple[str, str] | None:
    """``(what, message)`` when the file does not parse (the parser's message) or, Python, parses
    with functions that hold no code; None when it is fine, or when no checker could tell (missing,
    timed out, killed)."""
    env = {"HE_CHECK_PATH": path, "HE_CHECK_PARSE": _PARSE}
    ran = await run_shell(
        _COMMAND,
        workspace,
        timeout_s=min(timeout_s, TIME_LIMIT_S),
        limit=NOTE_CHARS + 100,
        env=env,
        sandbox=sandbox,
    )
    for mark, said in (
        (NOT_PARSED, "does not parse as {language}"),
        (NO_BODY, "has a function with no code (only a docstring, pass or ...)"),
    ):
        if ran.error is None and ran.output.startswith(mark):
            message = ran.output[len(mark) :].strip()
            return (said, truncate(message, NOTE_CHARS)) if message else None
    return None
