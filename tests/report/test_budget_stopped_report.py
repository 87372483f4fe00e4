"""A budget-stopped run's report knows every event the run wrote (budget_exhausted included)."""

from __future__ import annotations

from pathlib import Path

from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.runs.ledger import read_lines


def test_a_budget_stopped_runs_html_report_knows_all_its_events(harness_dir: Path, cli, learner) -> None:
    result = cli.invoke(app, run_args(harness_dir, learner, "-n", "5", "--max-tokens", "50"))
    assert result.exit_code in (0, 1), result.output
    (run,) = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    names = [e["event"] for e in read_lines(run / "ledger.jsonl")]
    assert "budget_exhausted" in names and names[-1] == "run_finished"
    out = run.parent / "report.html"
    report = cli.invoke(app, ["report", str(run), "--html", str(out)])
    assert report.exit_code == 0, report.output
    html = out.read_text(encoding="utf-8")
    assert "Events this version does not know" not in html
    assert "budget_exhausted" in html and "the tokens budget was reached" in html
