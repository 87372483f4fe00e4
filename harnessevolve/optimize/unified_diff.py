"""Unified diffs applied in memory, by content: the ``patch_file`` edit operation's engine.

A hunk is located by its old lines (context and ``-`` lines), not by the line numbers of its
``@@`` header: small optimizer models write the text of a hunk far more reliably than its
numbers and counts, which ``patch(1)`` and the libraries built like it (``patch-ng``,
``whatthepatch``, ``unidiff``'s strict parser) trust. The header's old-start line is used only to
choose between several places where the old lines occur, and to place a hunk with no old lines.

All or nothing: every hunk is located in the original text before any is applied; a hunk that
is not found, overlaps another, or is ambiguous without a line number raises :class:`DiffError`
naming the hunk and the nearest line, and nothing is returned.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

HUNK_HEADER = re.compile(r"^@@+\s*-(\d+)(?:,(\d+))?\s+\+(\d+)(?:,(\d+))?\s*@@+")
BARE_HEADER = re.compile(r"^@@.*$")
FILE_HEADER = re.compile(r"^(---|\+\+\+)\s+(\S+)")
PREAMBLE = (
    "diff ",
    "index ",
    "new file mode",
    "deleted file mode",
    "similarity ",
    "rename ",
    "old mode",
    "new mode",
)


class DiffError(ValueError):
    """A diff that cannot be parsed or applied; the message says which hunk and why."""


@dataclass(frozen=True)
class Hunk:
    old_start: int | None
    """1-based line of the header's ``-start`` (None for a bare ``@@``)."""
    old: tuple[str, ...]
    new: tuple[str, ...]


@dataclass(frozen=True)
class Diff:
    old_path: str | None
    new_path: str | None
    hunks: tuple[Hunk, ...]

    @property
    def creates(self) -> bool:
        return self.old_path == "/dev/null"

    @property
    def deletes(self) -> bool:
        return self.new_path == "/dev/null"


def _strip_prefix(path: str) -> str:
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse_diff(text: str) -> Diff:
    """One file's unified diff. Tolerates what models get wrong: wrong counts in ``@@`` headers,
    a bare ``@@``, blank context lines without their leading space, a missing file header."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    fenced = re.search(r"```(?:diff|patch)?\s*\n(.*?)```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    paths: dict[str, str] = {}
    hunks: list[Hunk] = []
    old: list[str] | None = None
    new: list[str] = []
    start: int | None = None

    def close() -> None:
        if old is not None:
            if old == new:
                raise DiffError(f"hunk {len(hunks) + 1} changes nothing (no + or - lines)")
            hunks.append(Hunk(start, tuple(old), tuple(new)))

    lines = text.split("\n")
    for index, line in enumerate(lines):
        after = lines[index + 1] if index + 1 < len(lines) else ""
        header = FILE_HEADER.match(line)
        if header and header.group(1) == "---" and after.startswith("+++ "):
            if paths:
                raise DiffError("the diff changes more than one file; give one patch_file edit per file")
            close()
            old, new = None, []
            paths["---"] = _strip_prefix(header.group(2))
            continue
        if header and header.group(1) == "+++" and "---" in paths and "+++" not in paths:
            paths["+++"] = _strip_prefix(header.group(2))
            continue
        numbered = HUNK_HEADER.match(line)
        if numbered or BARE_HEADER.match(line):
            close()
            old, new = [], []
            start = int(numbered.group(1)) if numbered else None
            continue
        if old is None:  # before the first hunk: git's preamble lines, or a reply's prose
            continue
        if line.startswith("\\"):  # "\ No newline at end of file"
            continue
        if line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        elif line.startswith(" ") or line == "":
            old.append(line[1:])
            new.append(line[1:])
        else:
            raise DiffError(f"hunk {len(hunks) + 1}: line {line[:80]!r} starts with neither ' ', '-' nor '+'")
    close()
    if not hunks:
        raise DiffError("the diff has no hunks ('@@ -start,count +start,count @@' then lines)")
    trimmed = [_trim_trailing_blank(h) for h in hunks]
    return Diff(paths.get("---"), paths.get("+++"), tuple(trimmed))


def _trim_trailing_blank(hunk: Hunk) -> Hunk:
    """Drop blank context lines at a hunk's end: most are the split of the diff's final newline."""
    old, new = list(hunk.old), list(hunk.new)
    while old and new and old[-1] == "" and new[-1] == "":
        old.pop()
        new.pop()
    return Hunk(hunk.old_start, tuple(old), tuple(new))


def _occurrences(lines: list[str], block: tuple[str, ...], loose: bool) -> list[int]:
    def same(a: str, b: str) -> bool:
        return a.rstrip() == b.rstrip() if loose else a == b

    width = len(block)
    return [
        i for i in range(len(lines) - width + 1) if all(same(lines[i + k], block[k]) for k in range(width))
    ]


def _locate(lines: list[str], hunk: Hunk, number: int) -> int:
    if not hunk.old:
        if hunk.old_start is None:
            raise DiffError(f"hunk {number} only adds lines and has no line number to place them")
        return min(max(hunk.old_start, 0), len(lines))
    found = _occurrences(lines, hunk.old, loose=False) or _occurrences(lines, hunk.old, loose=True)
    if not found:
        first = next((line for line in hunk.old if line.strip()), hunk.old[0])
        close = difflib.get_close_matches(first, lines, n=1, cutoff=0.6)
        nearest = f"; the closest line is {close[0]!r}" if close else ""
        raise DiffError(
            f"hunk {number}: its old lines (context and '-' lines) are not in the file, "
            f"starting {first[:80]!r}{nearest}"
        )
    if len(found) > 1:
        if hunk.old_start is None:
            raise DiffError(
                f"hunk {number}: its old lines occur {len(found)} times; add context lines or a line number"
            )
        return min(found, key=lambda i: abs(i + 1 - hunk.old_start))  # type: ignore[operator]
    return found[0]


def apply_diff(text: str | None, diff: Diff) -> str | None:
    """The file's new text (None: the diff deletes it); ``text`` None means the file does not exist."""
    if diff.creates:
        if text is not None:
            raise DiffError("the diff creates the file (--- /dev/null), but it exists")
        added = [line for h in diff.hunks for line in h.new]
        return "\n".join(added) + "\n"
    if text is None:
        raise DiffError("the file does not exist (a new file's diff starts with --- /dev/null)")
    lines = text.split("\n")
    final_newline = text.endswith("\n")
    if final_newline:
        lines.pop()
    spans: list[tuple[int, int, Hunk]] = []
    for number, hunk in enumerate(diff.hunks, 1):
        at = _locate(lines, hunk, number)
        spans.append((at, at + len(hunk.old), hunk))
    spans.sort(key=lambda s: s[0])
    for (_, end, _), (start, _, _) in zip(spans, spans[1:], strict=False):
        if start < end:
            raise DiffError("two hunks change overlapping lines; merge them into one hunk")
    out: list[str] = []
    cursor = 0
    for start, end, hunk in spans:
        out += lines[cursor:start] + list(hunk.new)
        cursor = end
    out += lines[cursor:]
    if diff.deletes and not any(out):
        return None
    return "\n".join(out) + ("\n" if final_newline or not lines else "")
