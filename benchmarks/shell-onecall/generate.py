"""Generate the shell-onecall task files (``tasks/<id>.yaml``) deterministically.

Rerun after editing this script (or ``../taskgen.py``, the plumbing it shares), from any folder::

    .venv/bin/python benchmarks/shell-onecall/generate.py            # rewrites its tasks/ folder
    .venv/bin/python benchmarks/shell-onecall/generate.py --out DIR  # writes somewhere else

``tests/benchmarks/test_shell_onecall.py`` checks that the committed files match this script and
replays every task's ``gold`` tool calls through the real checkers.

This is the one-call tier, for models too small for shell-basics: every task is solved by ONE
tool call whose effect on the workspace is what the checks look at (``file`` and ``command``
checks, never the submitted answer), so a run passes as soon as the right call is made, even if
the model never submits. The gold is that call followed by ``submit {"answer": "done"}``. The
instruction names every file, folder and literal text the call needs. Checks look only at the
final state, so repeating the call (a small model often does, until the step limit) still passes:
``mkdir -p`` and ``cp`` are idempotent, a second ``mv`` or ``rm`` fails but leaves the right
state, and append-line accepts its line once or more at the end of the intact original.

Eight families of eight tasks (ids ``<family>-01`` .. ``-08``); tasks 1-4 are ``train``, 5-6
``validation``, 7-8 ``test``. make-dir, make-empty-file and write-file are easy enough for a
model to guess; copy-file, move-into-dir, delete-file, append-line and rename-file each want a
specific command that a demonstration teaches. Tools: ``bash``, ``read_file``, ``write_file``,
``submit``.
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/, for taskgen

import taskgen  # noqa: E402
from taskgen import Family, Spec, call, lines, words  # noqa: E402

# Everyday file and folder names: plain letters, digits and dots, safe unquoted in a shell.
# fmt: off
FILES = (
    "report.txt", "notes.md", "data.csv", "server.log", "draft.txt", "todo.txt", "summary.md",
    "budget.csv", "errors.log", "ideas.txt", "letter.txt", "recipe.md", "scores.csv", "access.log",
    "journal.txt", "agenda.md", "invoice.txt", "contacts.csv", "changes.md", "output.log",
)
TEXT_FILES = tuple(f for f in FILES if f.endswith((".txt", ".md")))
FOLDERS = (
    "archive", "backup", "saved", "storage", "old", "logs", "photos", "music", "drafts", "reports",
    "images", "scripts", "docs", "cache", "build", "inbox", "projects", "exports",
)
# fmt: on
README = "This is a scratch workspace. Do exactly what the task says.\n"


def text(rng: random.Random, low: int, high: int) -> str:
    """A line of ``low``..``high`` distinct words."""
    return " ".join(words(rng, rng.randint(low, high)))


def fixed_line(content: str) -> str:
    """A ``grep -qxF`` test that ``content``'s lines are still what they were (all one-liners here)."""
    assert re.fullmatch(r"[a-z ]+\n", content), content
    return f"'{content.rstrip()}'"


# --- families: each makes one instance for a phrasing (0-2) -----------------------------------

# A Spec here: ``instruction``, setup ``files``, ``checker`` and the one ``action`` call that
# solves it.


def make_dir(rng: random.Random, phrasing: int) -> Spec:
    folder = rng.choice(FOLDERS)
    instruction = [
        f"Create a folder named {folder}.",
        f"Make a new directory called {folder} in the workspace.",
        f"Create the directory {folder}",
    ][phrasing]
    return {
        "instruction": instruction,
        "files": {"README.txt": README},
        "checker": [{"type": "command", "run": f"test -d {folder}"}],
        "action": call("bash", command=f"mkdir {folder}"),
    }


def write_file(rng: random.Random, phrasing: int) -> Spec:
    path = rng.choice(TEXT_FILES)
    content = text(rng, 2, 3)
    instruction = [
        f"Create the file {path} containing exactly this text: {content}",
        f"Write the text '{content}' into a new file named {path}.",
        f"Make a file called {path} whose only line is: {content}",
    ][phrasing]
    return {
        "instruction": instruction,
        "files": {"README.txt": README},
        "checker": [{"type": "file", "path": path, "expected": content, "match": "exact"}],
        "action": call("write_file", path=path, content=f"{content}\n"),
    }


def copy_file(rng: random.Random, phrasing: int) -> Spec:
    source = rng.choice(FILES)
    stem, ext = source.rsplit(".", 1)
    target = rng.choice([f"{stem}.bak", f"{stem}-copy.{ext}", f"{stem}-old.{ext}", f"{stem}2.{ext}"])
    content = lines([text(rng, 2, 3) for _ in range(rng.randint(1, 3))])
    instruction = [
        f"Copy {source} to {target}.",
        f"Make a copy of {source} named {target}; keep the original.",
        f"Duplicate the file {source} as {target}",
    ][phrasing]
    return {
        "instruction": instruction,
        "files": {source: content},
        "checker": [
            {"type": "file", "path": source, "expected": content, "match": "exact"},
            {"type": "file", "path": target, "expected": content, "match": "exact"},
        ],
        "action": call("bash", command=f"cp {source} {target}"),
    }


def move_into_dir(rng: random.Random, phrasing: int) -> Spec:
    name, other = rng.sample(FILES, 2)
    folder = rng.choice(FOLDERS)
    content, other_content = f"{text(rng, 2, 3)}\n", f"{text(rng, 2, 3)}\n"
    instruction = [
        f"Create a directory named {folder} and move {name} into it.",
        f"Move {name} into a new folder called {folder}.",
        f"Make the folder {folder} and put {name} inside it",
    ][phrasing]
    check = (
        f"test -f {folder}/{name} && test ! -e {name} && grep -qxF {fixed_line(content)} {folder}/{name}"
        f" && grep -qxF {fixed_line(other_content)} {other}"
    )
    return {
        "instruction": instruction,
        "files": {name: content, other: other_content},
        "checker": [{"type": "command", "run": check}],
        "action": call("bash", command=f"mkdir -p {folder} && mv {name} {folder}/"),
    }


def delete_file(rng: random.Random, phrasing: int) -> Spec:
    name, *others = rng.sample(FILES, rng.randint(2, 3))
    contents = {f: f"{text(rng, 2, 3)}\n" for f in [name, *others]}
    instruction = [
        f"Delete the file {name}.",
        f"Remove {name} from the workspace and leave the other files alone.",
        f"{name} is no longer needed: delete it",
    ][phrasing]
    kept = " && ".join(f"grep -qxF {fixed_line(contents[f])} {f}" for f in others)
    return {
        "instruction": instruction,
        "files": contents,
        "checker": [{"type": "command", "run": f"test ! -e {name} && {kept}"}],
        "action": call("bash", command=f"rm {name}"),
    }


def append_line(rng: random.Random, phrasing: int) -> Spec:
    name = rng.choice(TEXT_FILES)
    original = [text(rng, 2, 3) for _ in range(rng.randint(2, 4))]
    line = text(rng, 2, 2)
    while line in original:
        line = text(rng, 2, 2)
    instruction = [
        f"Append the line '{line}' to the end of {name}.",
        f"Add a new last line to {name} with the text: {line}",
        f"Add the line '{line}' at the bottom of {name}, keeping its current lines.",
    ][phrasing]
    # The intact original, then the new line once or more (a repeated append still passes), the
    # last newline optional. Words and spaces only, so nothing needs escaping.
    assert all(re.fullmatch(r"[a-z ]+", x) for x in [*original, line])
    body = "".join(rf"{x}\n" for x in original)
    pattern = rf"\A{body}(?:{line}\n)*{line}\n?\Z"
    return {
        "instruction": instruction,
        "files": {name: lines(original)},
        "checker": [{"type": "file", "path": name, "expected": pattern, "match": "regex"}],
        "action": call("bash", command=f"echo '{line}' >> {name}"),
    }


def rename_file(rng: random.Random, phrasing: int) -> Spec:
    old = rng.choice(FILES)
    new = rng.choice([f for f in FILES if f != old and f.rsplit(".", 1)[1] == old.rsplit(".", 1)[1]])
    content = f"{text(rng, 2, 3)}\n"
    instruction = [
        f"Rename {old} to {new}.",
        f"Change the name of the file {old} to {new}.",
        f"Rename the file {old} so that it is called {new}",
    ][phrasing]
    check = f"test ! -e {old} && test -f {new} && grep -qxF {fixed_line(content)} {new}"
    return {
        "instruction": instruction,
        "files": {old: content},
        "checker": [{"type": "command", "run": check}],
        "action": call("bash", command=f"mv {old} {new}"),
    }


def make_empty_file(rng: random.Random, phrasing: int) -> Spec:
    name = rng.choice(FILES)
    instruction = [
        f"Create an empty file named {name}.",
        f"Make a new, empty file called {name}",
        f"Create {name} as an empty file.",
    ][phrasing]
    # "Empty" = nothing but whitespace, so `echo > F` and write_file with "" pass like `touch F`.
    check = f"test -f {name} && ! grep -q '[^[:space:]]' {name}"
    return {
        "instruction": instruction,
        "files": {"README.txt": README},
        "checker": [{"type": "command", "run": check}],
        "action": call("bash", command=f"touch {name}"),
    }


FAMILIES: dict[str, Family] = {
    "make-dir": make_dir,
    "write-file": write_file,
    "copy-file": copy_file,
    "move-into-dir": move_into_dir,
    "delete-file": delete_file,
    "append-line": append_line,
    "rename-file": rename_file,
    "make-empty-file": make_empty_file,
}


def finish(spec: Spec) -> dict[str, Any]:
    """What follows the checks in a task document: the gold, the one call and then a submit."""
    return {"gold": [spec["action"], call("submit", answer="done")]}


def build_tasks() -> list[dict[str, Any]]:
    """Every task document, in family then instance order."""
    return taskgen.build_tasks("shell-onecall", FAMILIES, finish)


if __name__ == "__main__":
    raise SystemExit(taskgen.main("shell-onecall", build_tasks))
