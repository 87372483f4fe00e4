"""A kept mutant -> one native task document (``task.schema.json``).

- **workspace**: every repository file, at the mutant (``setup.files``);
- **instruction**: the failing tests and the last line of each one's error, from the runner's
  output; never the mutation itself;
- **checker**: two ``command`` checks, run in the sandbox after the agent stops. Each copies the
  workspace to a scratch folder, puts back pristine copies of the test files and the runner (an
  embedded archive, so edits to the tests cannot make them pass) and runs a list of test ids:
  first the tests the mutant broke, then every test that passed on the original (regression);
- **gold**: the inverse patch as one ``bash`` call (a ``python3`` splice of the changed lines back
  to the original), then ``submit``: ``harnessevolve refs import`` replays it into the reference.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harnessevolve.synth.mutate import Mutation, apply, changed_span
from harnessevolve.synth.testrun import RUNNER, RUNNER_NAME

MAX_ERROR_CHARS = 240
MAX_LISTED_TESTS = 8


@dataclass(frozen=True)
class KeptMutant:
    task_id: str
    mutations: tuple[Mutation, ...]
    failing: tuple[str, ...]
    """Tests the mutant fails (stably) and the original passes, sorted."""
    details: dict[str, str]
    """Test id -> its failure text on the mutant."""
    call_depth: int
    """Frames of repository code between the first failing test and the error (0 = in the test)."""

    @property
    def difficulty(self) -> dict[str, int]:
        return {
            "mutations": len(self.mutations),
            "failing_tests": len(self.failing),
            "changed_lines": sum(m.original.count("\n") + 1 for m in self.mutations),
            "call_depth": self.call_depth,
        }


def error_line(detail: str) -> str:
    """The last non-empty line of a failure's traceback (``AssertionError: 3 != 4``), capped."""
    lines = [ln.strip() for ln in detail.strip().splitlines() if ln.strip()]
    line = lines[-1] if lines else "failed"
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 3] + "..."


def call_depth(detail: str, sources: Iterable[str]) -> int:
    """How many traceback frames lie in the repository's (non-test) source files."""
    names = tuple(sources)
    return sum(
        1 for ln in detail.splitlines() if ln.strip().startswith('File "') and any(n in ln for n in names)
    )


def instruction(kept: KeptMutant) -> str:
    listed = kept.failing[:MAX_LISTED_TESTS]
    lines = [f"- {t}: {error_line(kept.details.get(t, ''))}" for t in listed]
    more = len(kept.failing) - len(listed)
    if more > 0:
        lines.append(f"- ... and {more} more")
    return (
        "This Python repository has a bug: these tests fail.\n"
        + "\n".join(lines)
        + "\n\nFind the bug in the source code and fix it so that every test passes. Do not change the "
        "test files (they are restored before checking). Run a test with "
        "`python3 -m unittest <test id>`. When you are done, submit 'done'."
    )


def _archive(files: dict[str, str]) -> str:
    """A base64 tar.gz of ``files`` (deterministic: fixed mtimes, sorted names)."""
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as packed,
        tarfile.open(fileobj=packed, mode="w") as tar,
    ):
        for name in sorted(files):
            data = files[name].encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def check_command(test_files: dict[str, str], ids: Sequence[str]) -> str:
    """The shell checker: pristine tests + runner + the id list, unpacked over a scratch copy of
    the workspace; exit 0 only when every listed test passes."""
    blob = _archive({**test_files, RUNNER_NAME: RUNNER, ".he_ids.txt": "".join(f"{t}\n" for t in ids)})
    removals = " ".join(sorted({json.dumps(name) for name in test_files}))
    return (
        'he_d="$(mktemp -d "${TMPDIR:-/tmp}/he-synth-XXXXXX")" || exit 97\n'
        "trap 'rm -rf \"$he_d\"' EXIT\n"
        'cp -R . "$he_d/w" && cd "$he_d/w" || exit 97\n'
        f"rm -f {removals}\n"
        f"printf %s '{blob}' | base64 -d | tar -xzf - || exit 97\n"
        f"python3 -s {RUNNER_NAME} --ids .he_ids.txt\n"
    )


def unique_hunk(original: str, mutant: str) -> tuple[str, str]:
    """The changed lines with as much surrounding context as makes them occur once in ``mutant``:
    (original text, mutant text), for a splice that cannot land in the wrong place."""
    a, b = original.splitlines(keepends=True), mutant.splitlines(keepends=True)
    head, tail = changed_span(a, b)
    lo, end_a, end_b = head, len(a) - tail, len(b) - tail
    while mutant.count("".join(b[lo:end_b])) != 1 and (lo > 0 or end_b < len(b)):
        if lo > 0:
            lo -= 1
        if end_b < len(b):
            end_a, end_b = end_a + 1, end_b + 1
    return "".join(a[lo:end_a]), "".join(b[lo:end_b])


def gold_script(original: dict[str, str], mutant: dict[str, str], names: Iterable[str]) -> str:
    """A python3 program (run through bash) that splices each changed run of lines in the files
    ``names`` back to the original."""
    lines = ["python3 - <<'HE_PATCH'", "import pathlib"]
    for name in sorted(set(names)):
        good, bad = unique_hunk(original[name], mutant[name])
        lines += [
            f"p = pathlib.Path({json.dumps(name)})",
            "s = p.read_text(encoding='utf-8')",
            f"bad, good = {json.dumps(bad)}, {json.dumps(good)}",
            "assert s.count(bad) == 1, 'the file has changed since the bug was found'",
            "p.write_text(s.replace(bad, good, 1), encoding='utf-8')",
        ]
    return "\n".join([*lines, "HE_PATCH", "python3 -m unittest -q 2>&1 | tail -n 1"])


def gold_hunks(command: str) -> list[tuple[str, str, str]]:
    """(file, bad, good) of each splice in a ``gold_script`` (to rebuild the original from a task)."""
    decoder = json.JSONDecoder()
    out: list[tuple[str, str, str]] = []
    file = ""
    for line in command.splitlines():
        if line.startswith("p = pathlib.Path("):
            file = decoder.raw_decode(line, len("p = pathlib.Path("))[0]
        elif line.startswith("bad, good = "):
            bad, end = decoder.raw_decode(line, len("bad, good = "))
            good = decoder.raw_decode(line, end + 2)[0]
            out.append((file, bad, good))
    return out


def task_document(
    kept: KeptMutant,
    *,
    files: dict[str, str],
    test_files: dict[str, str],
    stable_passing: Sequence[str],
    split: str,
    repo_name: str,
    mutant: dict[str, str] | None = None,
    touched: Iterable[str] = (),
) -> dict[str, Any]:
    """The task for ``kept``; ``mutant`` is the repository at the bug (default: ``files`` with
    ``kept.mutations`` applied), ``files`` the original."""
    mutated = dict(mutant) if mutant is not None else dict(files)
    for name in {m.file for m in kept.mutations} if mutant is None else ():
        mutated[name] = apply(files[name], [m for m in kept.mutations if m.file == name])
    families = sorted({m.operator for m in kept.mutations})
    difficulty = kept.difficulty
    return {
        "version": 1,
        "id": kept.task_id,
        "instruction": instruction(kept),
        "split": split,
        "tags": [
            families[0] if len(families) == 1 else "multi",
            "swe-synth",
            repo_name,
            f"difficulty-{difficulty['mutations']}",
            *[f"op-{f}" for f in families],
        ],
        "setup": {"files": dict(sorted(mutated.items()))},
        "checker": [
            {"type": "command", "run": check_command(test_files, kept.failing)},
            {"type": "command", "run": check_command(test_files, stable_passing)},
        ],
        "answer": "done",
        "gold": [
            {
                "tool": "bash",
                "arguments": {
                    "command": gold_script(files, mutated, {m.file for m in kept.mutations} | set(touched))
                },
            },
            {"tool": "submit", "arguments": {"answer": "done"}},
        ],
    }
