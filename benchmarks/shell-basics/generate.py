"""Generate the shell-basics task files (``tasks/<id>.yaml``) deterministically.

Rerun after editing this script (or ``../taskgen.py``, the plumbing it shares), from any folder::

    .venv/bin/python benchmarks/shell-basics/generate.py            # rewrites benchmarks/shell-basics/tasks/
    .venv/bin/python benchmarks/shell-basics/generate.py --out DIR  # writes somewhere else

``tests/benchmarks/test_shell_basics.py`` checks that the committed files match this script and
replays every task's ``gold`` tool calls through the real checkers.

Eight families of eight tasks (ids ``<family>-01`` .. ``-08``); tasks 1-4 are ``train``, 5-6
``validation``, 7-8 ``test``. Each task is short (2-3 tool calls), names its files, and has one
obvious first action. Tools: ``bash``, ``read_file``, ``write_file``, ``submit``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/, for taskgen

import taskgen  # noqa: E402
from taskgen import WORDS, Family, Spec, call, lines, words  # noqa: E402

# --- families: each makes one instance for a phrasing (0-2) -----------------------------------

# A Spec here: ``instruction``, setup ``files``, ``checker``, ``answer`` (None for file-changing
# tasks), ``gold``.


def answered(instruction: str, files: dict[str, str], answer: str, match: str, work: dict[str, Any]) -> Spec:
    """A task whose gold makes the one ``work`` call, then submits ``answer`` (checked by ``match``)."""
    return {
        "instruction": instruction,
        "files": files,
        "checker": [{"type": "answer", "expected": answer, "match": match}],
        "answer": answer,
        "gold": [work, call("submit", answer=answer)],
    }


def changed(instruction: str, files: dict[str, str], check: dict[str, Any], *work: dict[str, Any]) -> Spec:
    """A task that changes the workspace (``check`` looks at it): the gold makes the ``work`` calls,
    then submits done; no answer is checked."""
    return {
        "instruction": instruction,
        "files": files,
        "checker": [check],
        "answer": None,
        "gold": [*work, call("submit", answer="done")],
    }


def read_word(rng: random.Random, phrasing: int) -> Spec:
    name, other = rng.sample(["secret.txt", "word.txt", "code.txt", "password.txt", "note.txt"], 2)
    word, decoy = words(rng, 2)
    instruction = [
        f"What word is written in {name}? Answer with just that word.",
        f"The file {name} contains a single word. Submit that word.",
        f"Read {name} and tell me the word inside it.",
    ][phrasing]
    files = {name: f"{word}\n", other: f"{decoy}\n"}
    return answered(instruction, files, word, "exact", call("read_file", path=name))


NUMERIC_KEYS = {"port": (1024, 9999), "timeout": (5, 120), "retries": (2, 9), "workers": (2, 64)}
WORD_KEYS = ("host", "user", "mode", "color", "region", "theme", "owner")


def lookup_key(rng: random.Random, phrasing: int) -> Spec:
    name = rng.choice(["config.txt", "settings.ini", "app.conf", "server.cfg"])
    keys = rng.sample(sorted(NUMERIC_KEYS), 2) + rng.sample(WORD_KEYS, rng.randint(2, 4))
    rng.shuffle(keys)
    values = dict(zip([k for k in keys if k in WORD_KEYS], words(rng, len(keys)), strict=False))
    values.update({k: str(rng.randint(*NUMERIC_KEYS[k])) for k in keys if k in NUMERIC_KEYS})
    key = rng.choice(keys)
    instruction = [
        f"What is the value of {key} in {name}?",
        f"{name} holds key=value settings. Submit the value of the {key} setting.",
        f"Look up {key} in {name} and answer with its value only.",
    ][phrasing]
    files = {name: lines([f"{k}={values[k]}" for k in keys])}
    return answered(instruction, files, values[key], "exact", call("read_file", path=name))


def count_lines(rng: random.Random, phrasing: int) -> Spec:
    name = rng.choice(["data.txt", "items.txt", "list.txt", "entries.txt", "lines.txt"])
    count = rng.randint(6, 24)
    content = [" ".join(rng.choices(WORDS, k=rng.randint(1, 3))) for _ in range(count)]
    instruction = [
        f"How many lines are in {name}?",
        f"Count the lines in {name} and submit the number.",
        f"{name} has one entry per line. How many entries are there?",
    ][phrasing]
    wc = call("bash", command=f"wc -l {name}")
    return answered(instruction, {name: lines(content)}, str(count), "number", wc)


LEVELS = ("INFO", "WARN", "ERROR")


def count_matches(rng: random.Random, phrasing: int) -> Spec:
    name = rng.choice(["server.log", "app.log", "events.log", "build.log"])
    level = rng.choice(["WARN", "ERROR"])
    hits = rng.randint(2, 7)
    others = [rng.choice([lv for lv in LEVELS if lv != level]) for _ in range(rng.randint(6, 14))]
    levels = [level] * hits + others
    rng.shuffle(levels)
    content, minute = [], rng.randint(0, 30)
    for lv in levels:
        minute += rng.randint(1, 3)
        content.append(f"10:{minute:02d} {lv} {' '.join(rng.choices(WORDS, k=rng.randint(2, 4)))}")
    instruction = [
        f"How many lines in {name} contain {level}?",
        f"Count the {level} lines in {name}. Submit the count.",
        f"{name} is a log file. How many of its lines mention {level}?",
    ][phrasing]
    grep = call("bash", command=f"grep -c {level} {name}")
    return answered(instruction, {name: lines(content)}, str(hits), "number", grep)


def first_sorted(rng: random.Random, phrasing: int) -> Spec:
    name = rng.choice(["words.txt", "list.txt", "entries.txt", "items.txt"])
    content = words(rng, rng.randint(5, 9))
    while content[0] == min(content):
        rng.shuffle(content)
    first = min(content)
    instruction = [
        f"Which word in {name} comes first in alphabetical order?",
        f"Sort the lines of {name} alphabetically and submit the first one.",
        f"{name} lists one word per line. Which word is alphabetically first?",
    ][phrasing]
    sort = call("bash", command=f"sort {name} | head -n 1")
    return answered(instruction, {name: lines(content)}, first, "exact", sort)


def write_file(rng: random.Random, phrasing: int) -> Spec:
    path = rng.choice(["notes/todo.txt", "out/greeting.txt", "docs/motto.txt", "reports/status.txt"])
    text = " ".join(words(rng, rng.randint(2, 4)))
    instruction = [
        f"Create the file {path} containing exactly this text: {text}",
        f"Write '{text}' into a new file {path} (create the folder too), then submit done.",
        f"Make a file at {path} whose only line is: {text}",
    ][phrasing]
    return changed(
        instruction,
        {"README.txt": "Put new files in the folder the task names.\n"},
        {"type": "file", "path": path, "expected": text, "match": "exact"},
        call("write_file", path=path, content=f"{text}\n"),
        call("read_file", path=path),
    )


def replace_word(rng: random.Random, phrasing: int) -> Spec:
    name = rng.choice(["poem.txt", "story.txt", "notes.txt", "draft.txt"])
    old, new, *pool = words(rng, 10)
    content = [rng.choices(pool, k=rng.randint(3, 5)) for _ in range(rng.randint(3, 5))]
    for _ in range(rng.randint(1, 3)):
        row = rng.choice(content)
        row.insert(rng.randint(0, len(row)), old)
    before = lines([" ".join(row) for row in content])
    instruction = [
        f"In {name}, replace every occurrence of the word {old} with {new}.",
        f"Edit {name} so that each {old} becomes {new}. Submit done when finished.",
        f"Change all instances of '{old}' in {name} to '{new}'.",
    ][phrasing]
    return changed(
        instruction,
        {name: before},
        {"type": "file", "path": name, "expected": before.replace(old, new), "match": "exact"},
        call("bash", command=f"sed -i 's/{old}/{new}/g' {name}"),
        call("read_file", path=name),
    )


def move_file(rng: random.Random, phrasing: int) -> Spec:
    name, other = rng.sample(["report.txt", "server.log", "notes.md", "data.csv", "draft.txt"], 2)
    folder = rng.choice(["archive", "backup", "saved", "storage", "old"])
    marker = " ".join(words(rng, 3))
    instruction = [
        f"Create a directory named {folder} and move {name} into it.",
        f"Move {name} into a new folder called {folder}, then submit done.",
        f"Make the folder {folder} and put {name} inside it; {name} should no longer be at the top level.",
    ][phrasing]
    check = (
        f"test -f {folder}/{name} && test ! -e {name} && grep -qxF '{marker}' {folder}/{name}"
        f" && test -f {other}"
    )
    files = {name: f"{marker}\n", other: " ".join(words(rng, 3)) + "\n"}
    return changed(
        instruction,
        files,
        {"type": "command", "run": check},
        call("bash", command=f"mkdir -p {folder} && mv {name} {folder}/"),
        call("bash", command=f"ls {folder}"),
    )


FAMILIES: dict[str, Family] = {
    "read-word": read_word,
    "lookup-key": lookup_key,
    "count-lines": count_lines,
    "count-matches": count_matches,
    "first-sorted": first_sorted,
    "write-file": write_file,
    "replace-word": replace_word,
    "move-file": move_file,
}


def finish(spec: Spec) -> dict[str, Any]:
    """What follows the checks in a task document: the answer (where there is one), then the gold."""
    answer = {} if spec["answer"] is None else {"answer": spec["answer"]}
    return answer | {"gold": spec["gold"]}


def build_tasks() -> list[dict[str, Any]]:
    """Every task document, in family then instance order."""
    return taskgen.build_tasks("shell-basics", FAMILIES, finish)


if __name__ == "__main__":
    raise SystemExit(taskgen.main("shell-basics", build_tasks))
