"""Outcomes say what happened: acceptances on ties are labelled (table, ledger), and the summary
states the net change since the seed; a run whose final harness equals the seed exits 1 with
"no net change", and one changed only by ties exits 1 with "no net gain" (those under the shipped
``--gates paper``, HarnessEvolve's accept-on-tie); by default a tie with no validation gain is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from policies import TogglePrompt

from harnessevolve.cli.app import app
from harnessevolve.optimize import registry


def events(harness: Path) -> list[dict]:
    (run,) = (harness / ".harnessevolve" / "runs").iterdir()
    return [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]


def run(cli, harness: Path, *extra: str):
    args = ["run", "-H", str(harness), "-b", "shell-basics", "--batch-size", "4"]
    return cli.invoke(app, [*args, "-m", "scripted/policy:gives_up", *extra])


def test_an_edit_and_its_undo_accepted_on_ties_is_no_net_change(
    cli, harness_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(registry.PROPOSERS, "toggle", TogglePrompt)
    result = run(cli, harness_dir, "-n", "2", "--proposer", "toggle", "--gates", "paper")
    assert result.exit_code == 1, result.output
    out = result.output
    assert out.count("accepted (tie)") >= 2, out
    assert "2 accepted (2 on ties: no gain on their batch), 0 reverted" in out
    assert "no net change: the final harness equals the seed" in out
    log = events(harness_dir)
    assert [e.get("tie") for e in log if e["event"] == "candidate_accepted"] == [True, True]
    finished = log[-1]
    assert finished["event"] == "run_finished" and finished["net_change"]["files"] == []
    assert finished["net_change"]["changed"] is False
    perf = next(v for v in log if v["event"] == "candidate_accepted")["verdicts"]
    assert any(v["gate"] == "performance" and v["reason"].startswith("tie: batch gain +0.000") for v in perf)


def test_a_harness_changed_only_by_ties_is_no_net_gain(cli, harness_dir: Path) -> None:
    result = run(cli, harness_dir, "-n", "1", "--proposer", "demo", "--gates", "paper")
    assert result.exit_code == 1, result.output
    assert "net change since the seed" in result.output and "prompts/examples.md" in result.output
    assert "validation 0.000 -> 0.000 (+0.000)" in result.output
    assert "no net gain: every accepted edit was a tie" in result.output


def test_ties_are_refused_by_default(cli, harness_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.PROPOSERS, "toggle", TogglePrompt)
    result = run(cli, harness_dir, "-n", "2", "--proposer", "toggle")
    assert "accepted" not in result.output.replace("0 accepted", ""), result.output
    log = events(harness_dir)
    assert not [e for e in log if e["event"] == "candidate_accepted"]
    reverted = [e for e in log if e["event"] == "candidate_reverted"]
    assert reverted and all(e["gate"] == "performance" for e in reverted)
    assert all("ties are not gains" in e["reason"] for e in reverted), reverted


def test_a_real_gain_exits_0_with_its_net_change(cli, harness_dir: Path) -> None:
    args = ["run", "-H", str(harness_dir), "-b", "shell-basics", "--batch-size", "8", "-n", "2"]
    result = cli.invoke(app, [*args, "-m", "scripted/policy:learner", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    net = doc["net_change"]
    assert net["changed"] and net["files"] == ["prompts/examples.md"] and net["delta"] > 0, net
    assert doc["no_net_gain"] is False
