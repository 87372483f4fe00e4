"""Atomic writes: a reader sees the old or the new file; the file gets the mode ``open`` would give
it (not the temp file's 0o600), and a replaced file keeps its mode."""

from __future__ import annotations

import os
from pathlib import Path

from harnessevolve.core.files import atomic_write_json, atomic_write_text


def test_a_new_file_gets_the_umask_mode_and_a_replaced_one_keeps_its_mode(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    os.umask(mask)
    page = tmp_path / "page.html"
    atomic_write_text(page, "<p>one</p>")
    assert page.stat().st_mode & 0o777 == 0o666 & ~mask
    page.chmod(0o640)
    atomic_write_json(page, {"two": 2})
    assert page.stat().st_mode & 0o777 == 0o640 and page.read_text().startswith("{")
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]  # no temp file left
