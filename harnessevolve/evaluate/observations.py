"""Whether a tool's observation says the call failed, read from the text alone.

Any agent's trajectory records what its tools returned, but only the built-in loop also notes
errors on the step (``extra.error``). ``tool_error`` reads the observation text:

- a JSON object with a non-empty ``error`` (or ``errors``, ``exception``) field, or
  ``"status": "error"`` / ``"success": false`` / ``"ok": false``; a JSON document is judged only
  by these fields, never by the words inside its values (``{"lines": ["Error: disk full"]}`` is a
  successful ``grep``);
- a non-zero exit code (``exit code 1``, ``Exit status: 2``, ``returncode=127``, ``[exit 1]``);
- a Python traceback, or a line that starts like an error (``Error: ...``, ``ValueError: ...``,
  ``bash: foo: command not found``, ``cat: x: No such file or directory``, ``Permission denied``).

It answers a short description of the error, or None.
"""

from __future__ import annotations

import json
import re

_EXIT = re.compile(
    r"(?:exit(?:ed)?[ _-]?(?:code|status)|return[ _-]?code|returncode|exit)\s*[:=]?\s*\[?(-?\d+)\]?",
    re.IGNORECASE,
)
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.MULTILINE)
_ERROR_LINE = re.compile(
    r"^\s*(?:\[?(?:error|fatal|exception|failed|failure)\]?\b[^\n]{0,80}?[:!]"
    r"|[A-Za-z_][\w.]*(?:Error|Exception)\s*:"
    r"|\S+:\s.*(?:command not found|No such file or directory|Permission denied|Is a directory|"
    r"Not a directory|not found|cannot access|invalid option|unrecognized option))",
    re.IGNORECASE | re.MULTILINE,
)
_SHORT = 160


def first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped ('' when there is none)."""
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _json_error(doc: object) -> str | None:
    if not isinstance(doc, dict):
        return None
    for key in ("error", "errors", "exception", "error_message"):
        value = doc.get(key)
        if value not in (None, "", [], {}, False):
            return f"{key}: {str(value)[:_SHORT]}"
    if str(doc.get("status", "")).lower() in ("error", "failed", "failure"):
        return f"status: {doc['status']}"
    for key in ("success", "ok"):
        if doc.get(key) is False:
            return f"{key}: false"
    return None


def tool_error(content: str | None) -> str | None:
    """A short description of the error the observation reports, or None when it reports none."""
    if not content:
        return None
    text = content.strip()
    if text[:1] in "{[":
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if doc is not None:
            return _json_error(doc)
    match = _EXIT.search(text)
    if match and int(match.group(1)) != 0:
        return f"exit code {match.group(1)}"
    if _TRACEBACK.search(text):
        last = [ln for ln in text.splitlines() if ln.strip()][-1].strip()
        return f"traceback: {last[:_SHORT]}"
    line = _ERROR_LINE.search(text)
    if line:
        return first_line(text[line.start() :])[:_SHORT]
    return None
