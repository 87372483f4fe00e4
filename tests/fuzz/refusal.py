"""What every fuzz case asserts about a refusal: exit 2, no traceback, one error line naming the
file and the field, a hint, and nothing written or changed (in the test's folder or $TMPDIR)."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.runs.tempdirs import tempdir_at

IGNORED = (".git/index",)
"""git refreshes its index's stat cache on ``git status``: not a change of anything the user has."""


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` (folders too) with a hash of its bytes or its link target."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.endswith(IGNORED):
            continue
        if path.is_symlink():
            out[rel] = "link:" + str(path.readlink())
        elif path.is_dir():
            out[rel] = "dir"
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "other"
    return out


@contextlib.contextmanager
def private_tmpdir() -> Iterator[Path]:
    """$TMPDIR (and ``tempfile``'s) pointed at a fresh folder, so leftovers are this case's own."""
    folder = Path(tempfile.mkdtemp(prefix="fuzz-tmp-"))
    try:
        with tempdir_at(folder):
            yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class Refusal:
    output: str
    error_line: str


def refused(
    root: Path,
    args: list[str],
    *,
    file: str,
    field: str | None,
    line_prefix: str = "Error:",
    hint: bool = True,
) -> Refusal:
    """Run ``args``; assert the refusal contract, with ``file`` and ``field`` in the one error line."""
    before = snapshot(root)
    with private_tmpdir() as tmp:
        result = CliRunner().invoke(app, args, catch_exceptions=True)
        leftovers = sorted(p.name for p in tmp.iterdir())
    output = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{args}: raised {result.exception!r}\n{output}"
    )
    assert "Traceback" not in output, output
    assert result.exit_code == 2, f"{args}: exit {result.exit_code}, want 2\n{output}"
    errors = [line for line in output.splitlines() if line.startswith(line_prefix)]
    assert len(errors) == 1, f"want one {line_prefix!r} line:\n{output}"
    line = errors[0]
    assert file in line, f"{file!r} not named in: {line}"
    if field is not None:
        assert field in line, f"field {field!r} not named in: {line}"
    assert ": :" not in line, line
    if hint:
        hints = [h for h in output.splitlines() if h.startswith("Hint:") and len(h) > len("Hint: ") + 3]
        assert hints, f"no hint:\n{output}"
    after = snapshot(root)
    assert after == before, f"changed: {sorted(set(after.items()) ^ set(before.items()))[:5]}"
    assert not leftovers, f"left in $TMPDIR: {leftovers}"
    return Refusal(output, line)
