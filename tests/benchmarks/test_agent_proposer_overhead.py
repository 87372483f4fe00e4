"""The agent proposer's set-up overhead script runs (one proposal, its figure printed)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "perf" / "agent_proposer_overhead.py"


@pytest.mark.skipif(not os.access("/usr/bin/bwrap", os.X_OK), reason="needs bubblewrap")
def test_agent_proposer_overhead_smoke(capsys) -> None:
    spec = importlib.util.spec_from_file_location("agent_proposer_overhead", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["agent_proposer_overhead"] = module
    spec.loader.exec_module(module)
    assert module.main(["--smoke", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["proposals"] == 1 and result["sandbox"] == "bwrap"
    assert 0 < result["workspace_median_s"] <= result["proposal_median_s"]
