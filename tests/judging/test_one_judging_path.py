"""``run``, ``gate`` and ``report --final`` judge and score the same way: one judge (smoke run
included), one scorer set-up that honours the run's sandbox and limits."""

from __future__ import annotations

import json
from pathlib import Path

import git
from policies import FragileLearner, ulimit_probe
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.runs.ledger import read_lines

DEMO = """## Example
Task: Read password.txt and tell me the word inside it.
Step 1: call read_file {"path": "password.txt"}
Result: falcon
Step 2: call submit {"answer": "falcon"}
"""


def test_gate_fails_a_candidate_whose_smoke_run_breaks_the_model_call(
    harness_dir: Path, cli, shell_basics
) -> None:
    repo = git.Repo(harness_dir)
    base = repo.head.commit.hexsha
    (harness_dir / "prompts" / "examples.md").write_text(DEMO)
    repo.git.add("-A")
    repo.git.commit("-qm", "add a demonstration")
    register_script("fragile-gate", FragileLearner(shell_basics))
    try:
        result = cli.invoke(
            app,
            ["gate", "--harness", str(harness_dir), "--benchmark", "shell-basics", "--model",
             "scripted/fragile-gate", "--baseline", base, "--candidate", "HEAD", "--batch-size", "8",
             "--json"],
        )  # fmt: skip
    finally:
        unregister_script("fragile-gate")
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    assert report["version"] == 1
    assert [v["gate"] for v in report["verdicts"]] == ["quality", "leakage", "smoke"]
    smoke = report["verdicts"][-1]
    assert not smoke["passed"] and "model_error" in smoke["reason"]


def test_report_final_scores_in_the_runs_sandbox_with_its_limits(harness_dir: Path, cli) -> None:
    register_script("ulimit-final", ulimit_probe)
    try:
        args = run_args(
            harness_dir, "scripted/ulimit-final", "-n", "1", "--sandbox-limits", "max_file_mb=3,cpu_s=40"
        )
        result = cli.invoke(app, args)
        assert result.exit_code in (0, 1), result.output
        final = cli.invoke(app, ["report", "--harness", str(harness_dir), "--final", "--json"])
    finally:
        unregister_script("ulimit-final")
    assert final.exit_code == 0, final.output
    (run,) = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    assert read_lines(run / "ledger.jsonl")[-1]["event"] == "test_evaluated"
    saved = next((run / "final").rglob("*.json")).read_text()
    assert "3072\\n40" in saved  # the run's 3 MiB and 40 CPU seconds, not the defaults


def test_the_quality_gate_measures_the_prompt_with_the_runs_model_not_the_harnesss(
    harness_dir: Path, cli
) -> None:
    """The harness names the embedded model (a 4096-token window, its own tokenizer); a gate run
    with ``--model scripted/...`` measures against that model instead (no known window)."""
    repo = git.Repo(harness_dir)
    base = repo.head.commit.hexsha
    (harness_dir / "prompts" / "examples.md").write_text(DEMO)
    repo.git.add("-A")
    repo.git.commit("-qm", "add a demonstration")
    result = cli.invoke(
        app,
        ["gate", "--harness", str(harness_dir), "--benchmark", "shell-basics", "--model",
         "scripted/policy:gives_up", "--baseline", base, "--candidate", "HEAD", "--batch-size", "2",
         "--json"],
    )  # fmt: skip
    report = json.loads(result.output)
    quality = next(v for v in report["verdicts"] if v["gate"] == "quality")
    assert quality["numbers"]["context_window"] is None, quality  # the harness's model: 4096
