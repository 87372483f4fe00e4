"""Where `refs import` writes: next to a user's suite (or --out), never into the tool's own
checkout or installed package."""

from __future__ import annotations

import shutil
from pathlib import Path

from harnessevolve.cli.app import app
from harnessevolve.core import paths


def snapshot(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_a_suite_without_references_gets_them_next_to_its_tasks(cli, tmp_path: Path) -> None:
    suite = tmp_path / "my-suite"
    shutil.copytree(paths.builtin_dir("benchmarks") / "shell-basics", suite)
    (suite / "benchmark.yaml").write_text("version: 1\nname: my-suite\n")
    for extra in sorted((suite / "tasks").glob("*.yaml"))[4:]:
        extra.unlink()  # four tasks are enough
    builtin_refs = paths.builtin_dir("trajectories")
    before = snapshot(builtin_refs)
    result = cli.invoke(app, ["refs", "import", "-b", str(suite), "--split", "all"])
    assert result.exit_code == 0, result.output
    written = sorted(p.stem for p in (suite / "trajectories").glob("*.json"))
    assert written == sorted(p.stem for p in (suite / "tasks").glob("*.yaml"))
    assert str(suite / "trajectories") in result.output
    assert snapshot(builtin_refs) == before
    assert not (builtin_refs / "my-suite").exists()


def test_out_inside_the_package_is_refused(cli, tmp_path: Path) -> None:
    target = paths.PACKAGE / "refs-here"
    result = cli.invoke(app, ["refs", "import", "-b", "shell-basics", "--out", str(target)])
    assert result.exit_code == 2, result.output
    assert "--out: refusing to write into the installed harnessevolve package" in result.output
    assert not target.exists()
