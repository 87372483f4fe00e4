"""`gate` through the CLI: pass, fail, JUnit XML and Markdown, bad revisions."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import git

from harnessevolve.cli.app import app

DEMO = """## Example
Task: Read password.txt and tell me the word inside it.
Step 1: call read_file {"path": "password.txt"}
Result: falcon
Step 2: call submit {"answer": "falcon"}
"""


def commit_examples(harness_dir: Path, text: str, message: str) -> str:
    (harness_dir / "prompts" / "examples.md").write_text(text)
    repo = git.Repo(harness_dir)
    repo.git.add("-A")
    repo.git.commit("-qm", message)
    return repo.head.commit.hexsha


def gate_args(harness_dir: Path, model: str, baseline: str, candidate: str, *extra: str) -> list[str]:
    return [
        "gate",
        "--harness",
        str(harness_dir),
        "--benchmark",
        "shell-basics",
        "--model",
        model,
        "--baseline",
        baseline,
        "--candidate",
        candidate,
        "--batch-size",
        "8",
        *extra,
    ]


def gate_with_reports(tmp_path: Path, cli, harness_dir: Path, model: str, base: str, cand: str):
    """Run `gate` writing JUnit and Markdown reports; returns (result, junit path, markdown path)."""
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    args = gate_args(harness_dir, model, base, cand, "--junit", str(junit), "--markdown", str(md))
    return cli.invoke(app, args), junit, md


def gate_agent_edit(cli, harness: Path, model: str, old: str, new: str, message: str):
    """`gate --json` in a new python-agent harness at ``harness``, of a commit that replaces ``old``
    with ``new`` in its agent.py; returns the result."""
    assert cli.invoke(app, ["init", str(harness), "--template", "python-agent"]).exit_code == 0
    repo = git.Repo(harness)
    base = repo.head.commit.hexsha
    agent = harness / "agent.py"
    agent.write_text(agent.read_text().replace(old, new))
    repo.git.commit("-qam", message)
    return cli.invoke(app, gate_args(harness, model, base, repo.head.commit.hexsha, "--json"))


def test_gate_passes_a_better_candidate(tmp_path: Path, harness_dir: Path, cli, learner) -> None:
    base = git.Repo(harness_dir).head.commit.hexsha
    cand = commit_examples(harness_dir, DEMO, "add a demonstration")
    result, junit, md = gate_with_reports(tmp_path, cli, harness_dir, learner, base, cand)
    assert result.exit_code == 0, result.output
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == "5" and suite.get("failures") == "0"
    names = [c.get("name") for c in suite.iter("testcase")]
    assert names == ["quality", "leakage", "smoke", "performance", "heldout"]
    summary = md.read_text()
    assert "gate: passed" in summary and "| heldout | pass |" in summary


def test_gate_fails_a_worse_candidate(tmp_path: Path, harness_dir: Path, cli, learner) -> None:
    base = commit_examples(harness_dir, DEMO, "one demonstration")
    worse = DEMO + "\n" + DEMO.replace("password.txt", "secret.txt")
    cand = commit_examples(harness_dir, worse, "two demonstrations confuse the agent")
    junit = tmp_path / "gate.xml"
    result = cli.invoke(app, gate_args(harness_dir, learner, base, cand, "--junit", str(junit)))
    assert result.exit_code == 1, result.output
    failures = {c.get("name"): c.find("failure") for c in ET.parse(junit).getroot().iter("testcase")}
    assert failures["quality"] is None and failures["leakage"] is None
    assert failures["performance"] is not None and "batch gain" in failures["performance"].get("message")
    assert failures["heldout"] is not None


def test_gate_rejects_a_non_editable_change(harness_dir: Path, cli, learner) -> None:
    base = git.Repo(harness_dir).head.commit.hexsha
    path = harness_dir / "harness.yaml"
    text = path.read_text()  # the template opens harness.yaml#loop, not the rest of the file
    assert "harness.yaml#loop" in text and "\nname: shell-agent\n" in text
    path.write_text(text.replace("\nname: shell-agent\n", "\nname: renamed-agent\n"))
    repo = git.Repo(harness_dir)
    repo.git.commit("-qam", "rename the harness")
    result = cli.invoke(app, gate_args(harness_dir, learner, base, "HEAD", "--json"))
    assert result.exit_code == 1
    assert "not editable: harness.yaml" in result.output


def test_gate_unknown_revision(harness_dir: Path, cli, learner) -> None:
    result = cli.invoke(app, gate_args(harness_dir, learner, "HEAD", "no-such-branch"))
    assert result.exit_code == 2
    assert "unknown revision 'no-such-branch'" in result.output


def test_gate_does_not_touch_the_working_tree(harness_dir: Path, cli, learner) -> None:
    base = git.Repo(harness_dir).head.commit.hexsha
    cand = commit_examples(harness_dir, DEMO, "add a demonstration")
    (harness_dir / "prompts" / "system.md").write_text("work in progress\n")
    result = cli.invoke(app, gate_args(harness_dir, learner, base, cand))
    assert result.exit_code == 0, result.output
    assert (harness_dir / "prompts" / "system.md").read_text() == "work in progress\n"


# --- leakage and the noise-aware performance mode ---------------------------------------------------

LEAK = """## Example
Task: The file password.txt contains a single word. Submit that word.
Step 1: call read_file {"path": "password.txt"}
Result: zebra
Step 2: call submit {"answer": "zebra"}
"""  # validation task read-word-06


def test_gate_rejects_a_candidate_that_embeds_a_validation_task(
    tmp_path: Path, harness_dir: Path, cli, learner
) -> None:
    base = git.Repo(harness_dir).head.commit.hexsha
    cand = commit_examples(harness_dir, LEAK, "a demonstration of a held-out task")
    result, junit, md = gate_with_reports(tmp_path, cli, harness_dir, learner, base, cand)
    assert result.exit_code == 1, result.output
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert list(cases) == ["quality", "leakage"]  # nothing is scored for a leaking candidate
    failure = cases["leakage"].find("failure")
    assert failure is not None
    assert failure.get("message") == "embeds validation task read-word-06: instruction scores 1.00 >= 0.80"
    properties = {p.get("name"): p.get("value") for p in cases["leakage"].iter("property")}
    assert properties["max_task"] == "read-word-06" and properties["threshold"] == "0.8"
    summary = md.read_text()
    assert "gate: FAILED" in summary and "| leakage | FAIL | embeds validation task read-word-06" in summary


def test_gate_summaries_carry_confidence_intervals(tmp_path: Path, harness_dir: Path, cli, learner) -> None:
    base = git.Repo(harness_dir).head.commit.hexsha
    cand = commit_examples(harness_dir, DEMO, "add a demonstration")
    result, junit, md = gate_with_reports(tmp_path, cli, harness_dir, learner, base, cand)
    assert result.exit_code == 0, result.output
    summary = md.read_text()
    assert "| leakage | pass | no validation/test task embedded" in summary
    # the demonstration shows read-word-01, and its answer 'falcon' is train task lookup-key-02's
    assert "train demonstrations: lookup-key-02, read-word-01" in summary
    performance_row = next(line for line in summary.splitlines() if line.startswith("| performance |"))
    assert "99% CI" in performance_row and "McNemar p =" in performance_row
    heldout_row = next(line for line in summary.splitlines() if line.startswith("| heldout |"))
    assert "drop" in heldout_row and "99% CI" in heldout_row
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    properties = {p.get("name"): p.get("value") for p in cases["performance"].iter("property")}
    assert properties["mode"] == "fixed" and properties["gain_ci"].startswith("[")


SEQUENTIAL = """version: 1
performance:
  mode: sequential
  confidence: 0.8
  power: 0.9
  effect: 0.3
  increment: 8
"""


def test_gate_sequential_mode_accepts_a_better_candidate(
    tmp_path: Path, harness_dir: Path, cli, learner
) -> None:
    gates = tmp_path / "sequential.yaml"
    gates.write_text(SEQUENTIAL)
    base = git.Repo(harness_dir).head.commit.hexsha
    cand = commit_examples(harness_dir, DEMO, "add a demonstration")
    md = tmp_path / "gate.md"
    result = cli.invoke(
        app,
        gate_args(harness_dir, learner, base, cand, "--gates", str(gates), "--markdown", str(md), "--json"),
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    performance = next(v for v in report["verdicts"] if v["gate"] == "performance")
    numbers = performance["numbers"]
    assert report["performance_mode"] == "sequential" and numbers["mode"] == "sequential"
    assert performance["passed"] and performance["reason"].startswith("better: ")
    assert numbers["losses"] == 0 and numbers["wins"] >= 3
    assert (
        numbers["pairs"] <= 32 and numbers["rollouts"] == 2 * numbers["pairs"]
    )  # temperature 0: each task once
    assert numbers["llr"] >= numbers["accept_at"]
    assert "log LR" in md.read_text() and "80% CI" in md.read_text()


def test_gate_sequential_mode_rejects_a_worse_candidate_early(
    tmp_path: Path, harness_dir: Path, cli, learner
) -> None:
    gates = tmp_path / "sequential.yaml"
    gates.write_text(SEQUENTIAL)
    base = commit_examples(harness_dir, DEMO, "one demonstration")
    worse = DEMO + "\n" + DEMO.replace("password.txt", "secret.txt")
    cand = commit_examples(harness_dir, worse, "two demonstrations confuse the agent")
    junit = tmp_path / "gate.xml"
    result = cli.invoke(
        app, gate_args(harness_dir, learner, base, cand, "--gates", str(gates), "--junit", str(junit))
    )
    assert result.exit_code == 1, result.output
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    failure = cases["performance"].find("failure")
    assert failure is not None and failure.get("message").startswith("not better: 0 wins vs ")
    properties = {p.get("name"): p.get("value") for p in cases["performance"].iter("property")}
    assert properties["mode"] == "sequential" and int(properties["pairs"]) < 32


def test_gate_on_the_test_split_is_recorded(harness_dir: Path, cli, learner) -> None:
    import json

    base = git.Repo(harness_dir).head.commit.hexsha
    cand = commit_examples(harness_dir, DEMO, "add a demonstration")
    result = cli.invoke(app, gate_args(harness_dir, learner, base, cand, "--split", "test"))
    assert result.exit_code in (0, 1), result.output
    lines = (harness_dir / ".harnessevolve" / "sealed-test.jsonl").read_text().splitlines()
    assert len(lines) == 1
    event = json.loads(lines[0])
    assert event["event"] == "test_evaluated" and event["revisions"] == {"baseline": base, "candidate": cand}
    assert not git.Repo(harness_dir).is_dirty(untracked_files=True)
    # it keeps what it saw, as a run keeps its splits: per-task outcomes and every trajectory
    kept = harness_dir / event["kept"]
    assert event["kept"].startswith(".harnessevolve/gates/") and kept.name.endswith(f"{base[:8]}-{cand[:8]}")
    outcomes = json.loads((kept / "outcomes.json").read_text())
    assert set(outcomes["revisions"]) == {"baseline", "candidate"}
    for name, revision in outcomes["revisions"].items():
        assert revision["revision"] == event["revisions"][name]
        assert revision["score"] == event["scores"][name]
        assert len(revision["tasks"]) == event["tasks"]
        for task_id, outcome in revision["tasks"].items():
            assert set(outcome) >= {"score", "passed", "stop_reason"}
            assert (kept / "trajectories" / revision["harness_hash"] / f"{task_id}.json").is_file()
            assert (kept / "evaluations" / revision["harness_hash"] / f"{task_id}.json").is_file()
    assert "per-task outcomes and trajectories kept in" in result.output
