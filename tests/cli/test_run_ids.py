"""Run ids accept a unique prefix everywhere a run is named (status, log, report, run --resume,
train's --run), and an ambiguous prefix is a one-line error naming the matches."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harnessevolve.cli.app import app
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.runs.rundir import RunDir


def test_a_unique_prefix_names_the_run_everywhere(cli, harness_dir: Path) -> None:
    args = ["run", "-H", str(harness_dir), "-b", "shell-basics", "-n", "1", "--batch-size", "4"]
    ran = cli.invoke(app, [*args, "-m", "scripted/policy:gives_up"])
    assert ran.exit_code == 1
    (run_dir,) = (harness_dir / ".harnessevolve" / "runs").iterdir()
    # Piped (not a TTY) output is wide: the ledger path is never split across lines.
    assert any(f"ledger: {run_dir}/ledger.jsonl" in line for line in ran.output.splitlines()), ran.output
    prefix = run_dir.name[:-2]
    for command in (["status"], ["log", "--last", "1"], ["report"]):
        result = cli.invoke(app, [*command, prefix, "-H", str(harness_dir)])
        assert result.exit_code == 0 and "no run" not in result.output, (command, result.output)
    resumed = cli.invoke(app, ["run", "-H", str(harness_dir), "--resume", prefix])
    assert resumed.exit_code == 2 and "no run" not in resumed.output, resumed.output  # found; finished
    assert RunDir.find(prefix, harness_dir).load().root == run_dir

    shutil.copytree(run_dir, run_dir.with_name(run_dir.name[:-1] + "z"))  # a second run, same prefix
    result = cli.invoke(app, ["run", "-H", str(harness_dir), "--resume", prefix])
    assert result.exit_code == 2 and f"run id prefix {prefix!r} matches 2 runs" in result.output, (
        result.output
    )
    with pytest.raises(HarnessEvolveError, match="matches 2 runs"):
        RunDir.find(prefix, harness_dir).load()
