"""benchmarks/perf/efficacy.py on scripted models: the fixed task subset, one whole invocation
(seed, harnessevolve, harnessevolve on python-agent, harnessevolve + llm-rule, GEPA, best-of-k)
whose table and JSON show the rule proposer's gain and its counts from the ledger, and the
--smoke mode (3 seeds, every arm, the JSON the results folder holds). No real model."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from test_vs_gepa import MAGIC, MagicWordAgent, load_script

from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.models.scripted import register_script, unregister_script

efficacy = load_script("efficacy")


@pytest.fixture
def scripted():
    onecall = load_benchmark("shell-onecall")
    register_script("efficacy-agent", MagicWordAgent(onecall))
    register_script("efficacy-reflector", lambda _m, _t: f"RULE: {MAGIC}")
    yield "scripted/efficacy-agent", "scripted/efficacy-reflector"
    unregister_script("efficacy-agent")
    unregister_script("efficacy-reflector")


def test_subset_is_fixed_and_keeps_the_references() -> None:
    from harnessevolve.adapters import load_benchmark_spec
    from harnessevolve.scoring.references import load_references

    spec = "efficacy-subset:validation=3,test=2@shell-onecall"
    first, again = load_benchmark_spec(spec), load_benchmark_spec(spec)
    full = load_benchmark("shell-onecall")
    assert [len(first.split(s)) for s in ("train", "validation", "test")] == [len(full.split("train")), 3, 2]
    assert [t.id for t in first.tasks] == [t.id for t in again.tasks]
    refs = load_references(first)  # read from the whole benchmark's folder, its own tasks' only
    assert refs and set(refs) <= {t.id for t in first.tasks}
    assert first.references_dir == full.references_dir
    assert first.adapter == load_benchmark_spec("shell-onecall").adapter  # one rollout cache
    for bad in ("validation=3@", "valid=3@shell-onecall", "test=x@shell-onecall"):
        with pytest.raises(BenchmarkError):
            load_benchmark_spec(f"efficacy-subset:{bad}")


def test_one_invocation_runs_every_arm(scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    agent, reflector = scripted
    out = tmp_path / "efficacy.json"
    argv = ["--benchmark", "shell-onecall", "--model", agent, "--reflector", reflector, "--seeds", "1"]
    argv += ["--generations", "1", "--batch-size", "4", "--validation", "3", "--test", "3"]
    argv += ["--arms", "code,rule,gepa,bestofk"]
    assert efficacy.main([*argv, "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["command"].endswith(shlex.join(["benchmarks/perf/efficacy.py", *argv, "--json", str(out)]))
    rows = doc["seeds"][0]
    assert set(rows) == set(efficacy.ARMS) - {"harnessevolve + agent"}
    assert rows["seed harness"]["test"] == 0.0 and rows["seed (python-agent)"]["test"] == 0.0
    assert rows["harnessevolve (python-agent)"]["rollouts"] > 0
    rule = rows["harnessevolve + llm-rule"]
    assert rule["test"] == 1.0 and rule["gain_pts"] == 100.0 and MAGIC in rule["prompt"]
    assert rule["llm_rule"]["candidates"] >= 1 and rule["llm_rule"]["accepted"] == 1
    assert rows["harnessevolve"]["rollouts"] > 0
    assert rows["GEPA"]["rollouts"] <= rows["harnessevolve"]["rollouts"] + 3 + 6  # B, one iteration over
    assert rows["best-of-k (sc)"]["k"] == max(1, round(rows["harnessevolve"]["rollouts"] / 3))
    assert re.search(r"harnessevolve \+ llm-rule .* 1\.000 ± 0\.000 +100\.0 ± 0\.0", printed)
    assert "llm-rule (seed 0): " in printed and "total wall time" in printed
    capsys.readouterr()
    assert efficacy.main(["--from-json", str(out)]) == 0
    assert "harnessevolve + llm-rule" in capsys.readouterr().out


def test_a_fixed_budget_sets_gepa_and_best_of_k(scripted, tmp_path: Path) -> None:
    agent, reflector = scripted
    out = tmp_path / "fixed.json"
    argv = ["--benchmark", "shell-onecall", "--model", agent, "--reflector", reflector, "--seeds", "1"]
    argv += ["--generations", "1", "--batch-size", "2", "--validation", "2", "--test", "3", "--budget", "6"]
    assert efficacy.main([*argv, "--arms", "gepa,bestofk", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["seeds"][0]
    assert "harnessevolve + llm-rule" not in rows
    assert rows["GEPA"]["budget"] == 6 and rows["best-of-k (sc)"]["k"] == 2
    assert rows["best-of-k (sc)"]["rollouts"] == 6


def test_the_agent_arm_runs_the_coding_agent_optimizer(tmp_path: Path, capsys) -> None:
    """--arms agent: ``--proposer agent`` with the reflector as the optimizer agent's model (the smoke
    reflector, offered bash, edits the submit tool's description); its counts come from the ledger."""
    from efficacy_smoke import register_smoke_models

    agent, reflector = register_smoke_models()
    out = tmp_path / "agent.json"
    argv = ["--benchmark", "shell-basics", "--model", agent, "--reflector", reflector, "--seeds", "1"]
    argv += ["--generations", "1", "--batch-size", "2", "--validation", "2", "--test", "2", "--arms", "agent"]
    assert efficacy.main([*argv, "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["seeds"][0]
    assert set(rows) == {"seed harness", "harnessevolve", "harnessevolve + agent"}
    row = rows["harnessevolve + agent"]
    assert row["agent"]["candidates"] == 1 and row["agent"]["accepted"] == row["accepted"] == 1
    assert row["gain_pts"] == 100.0
    printed = capsys.readouterr().out
    assert "agent proposer (seed 0): 1 valid candidates of 1 proposals, 1 accepted" in printed


def test_help_documents_the_arms(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        efficacy.main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for arm in ("seed harness", "harnessevolve+rule", "GEPA", "best-of-k", "--jobs", "--threads", "--budget"):
        assert arm in text


@pytest.mark.slow  # minutes: 3 seeds x 6 arms of real rollouts (sandboxed), on scripted models
def test_smoke_mode_runs_every_arm_on_three_seeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--smoke: the scripted agent submits only when the loop or the submit tool makes it, so the
    behaviour edits (agent code on python-agent, the submit tool on shell-agent) can gain where a
    batch shows the failure; prompts cannot."""
    out = tmp_path / "smoke.json"
    assert efficacy.main(["--smoke", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["smoke"] is True and doc["command"].endswith(f"efficacy.py --smoke --json {out}")
    assert len(doc["seeds"]) == 3 and set(doc["load_average"]) == {"start", "end"}
    for rows in doc["seeds"]:
        assert set(rows) == set(efficacy.ARMS)
        assert rows["seed harness"]["test"] == 0.0 and rows["seed (python-agent)"]["test"] == 0.0
        assert rows["GEPA"]["gain_pts"] == 0.0 and rows["best-of-k (sc)"]["gain_pts"] == 0.0
        assert rows["harnessevolve + llm-rule"]["gain_pts"] == 0.0
        for arm in ("harnessevolve", "harnessevolve (python-agent)", "harnessevolve + agent"):
            assert rows[arm]["gain_pts"] in (0.0, 100.0)
            assert (rows[arm]["gain_pts"] == 100.0) == (rows[arm]["accepted"] == 1)
    code = [rows["harnessevolve (python-agent)"] for rows in doc["seeds"]]
    assert any(row["agent_py_changed"] for row in code)  # its accepted edits change the agent's code
    assert all(row["agent_py_changed"] == (row["accepted"] == 1) for row in code)
    printed = capsys.readouterr().out
    assert "harnessevolve on python-agent (code edits): test gain" in printed


def test_merge_joins_a_killed_runs_seed_with_a_later_part(tmp_path: Path, capsys) -> None:
    """--merge: a whole part (seeds 1-2, with its seed harness rows) and a killed run's per-seed
    file (seed 0, unfinished) become one 3-seed result with every command that made it."""
    seed_row = {"rollouts": 0, "tokens": 0, "wall_min": 1.0, "validation": 0.25, "test": 0.5, "to_best": 0}
    arm = {**seed_row, "rollouts": 10, "tokens": 100, "validation": 0.5, "test": 0.75, "accepted": 1}
    part = {
        "command": "python efficacy.py --first-seed 1",
        "seed_ids": [1, 2],
        "seed_rows": {"shell-agent": seed_row, "python-agent": None},
        "args": {"seeds": "3"},
        "seeds": [efficacy.finish_seed({"harnessevolve": dict(arm)}, seed_row) for _ in range(2)],
    }
    (tmp_path / "part.json").write_text(json.dumps(part))
    (tmp_path / "run.seed0.json").write_text(json.dumps({"harnessevolve": dict(arm, test=0.5)}))
    out = tmp_path / "efficacy-merged.json"
    assert (
        efficacy.main(
            ["--merge", str(tmp_path / "run.seed0.json"), str(tmp_path / "part.json"), "--json", str(out)]
        )
        == 0
    )
    merged = json.loads(out.read_text())
    assert len(merged["seeds"]) == 3 and merged["command"] == "python efficacy.py --first-seed 1"
    assert [s["harnessevolve"]["gain_pts"] for s in merged["seeds"]] == [0.0, 25.0, 25.0]
    assert merged["seeds"][0]["seed harness"]["test"] == 0.5
    assert "harnessevolve" in capsys.readouterr().out
