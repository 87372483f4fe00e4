"""The HTML report's per-task view (task x revision: pass/fail, trajectory link, first divergence),
the model in its header even when the run used the harness's own, ties and "no net change" flagged,
and chart series that coincide still distinguishable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from policies import TogglePrompt

from harnessevolve.cli.app import app
from harnessevolve.optimize import registry
from harnessevolve.report.run_view import load_run_view
from harnessevolve.report.task_matrix import task_matrix


def only_run(harness: Path) -> Path:
    (run_dir,) = (harness / ".harnessevolve" / "runs").iterdir()
    return run_dir


def test_the_task_view_shows_each_task_in_each_revision(cli, harness_dir: Path, tmp_path: Path) -> None:
    yaml_path = harness_dir / "harness.yaml"  # the run uses the harness's own model: no --model
    yaml_path.write_text(re.sub(r"(?m)^model: .*$", "model: scripted/policy:learner", yaml_path.read_text()))
    assert (
        cli.invoke(
            app,
            [
                "run",
                "-H",
                str(harness_dir),
                "-b",
                "shell-basics",
                "--allow-dirty",
                "-n",
                "2",
                "--batch-size",
                "8",
            ],
        ).exit_code
        == 0
    )
    run_dir = only_run(harness_dir)
    matrix = task_matrix(run_dir, list(load_run_view(run_dir).events))
    assert matrix.revisions[0].label == "seed" and any("accepted" in r.label for r in matrix.revisions)
    changed = [row for row in matrix.rows if row.changed]
    assert changed, "a demonstration made some task pass that failed in the seed"
    seed_cell = changed[0].cells[0]
    assert seed_cell is not None and not seed_cell.passed and seed_cell.cause and seed_cell.step

    out = tmp_path / "site" / "report.html"
    out.parent.mkdir()
    result = cli.invoke(app, ["report", str(run_dir), "--html", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert 'id="task-matrix"' in html and f"<code>{changed[0].task_id}</code>" in html
    assert f"step {seed_cell.step}: {seed_cell.cause}" in html
    links = re.findall(r'<a href="([^"]+/trajectories/[^"]+\.json)"', html)
    assert links and all((out.parent / link).resolve().is_file() for link in links)
    assert re.search(r'id="run-model">scripted/policy:learner<', html)
    assert "as its rollouts recorded" in html
    markers = re.findall(r'data-marker="(\w+)"', html)
    assert len(markers) >= 2 and len(set(markers)) == len(markers)  # one shape per series


def test_ties_and_no_net_change_are_flagged(
    cli, harness_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(registry.PROPOSERS, "toggle", TogglePrompt)
    args = ["run", "-H", str(harness_dir), "-b", "shell-basics", "--batch-size", "4", "-n", "2"]
    args += ["--gates", "paper"]  # HarnessEvolve's accept-on-tie: the default refuses ties
    assert cli.invoke(app, [*args, "-m", "scripted/policy:gives_up", "--proposer", "toggle"]).exit_code == 1
    result = cli.invoke(app, ["report", "-H", str(harness_dir), "--html", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert "(tie)" in result.output and "no net change" in result.output
    assert "scores per generation" in result.output and "accepted (tie)" in result.output  # as --help says
    html = (tmp_path / "r.html").read_text()
    assert 'id="no-net-change"' in html and "2 accepted edits cancel out" in html
    assert 'id="tie-flag" class="flag">2 of 2 accepted on a tie' in html
    assert html.count('class="badge tie"') >= 2
    status = cli.invoke(app, ["status", "-H", str(harness_dir)]).output
    assert "2 accepted (2 on ties)" in status and "no net change since the seed" in status, status
