"""`gate` through the CLI: pass, fail, JUnit XML and Markdown, bad revisions."""

from __future__ import annotations

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


def test_gate_passes_a_better_candidate(tmp_path: Path, harness_dir: Path, cli, learner) -> None:
    base = git.Repo(harness_dir).head.commit.hexsha
    cand = commit_examples(harness_dir, DEMO, "add a demonstration")
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    result = cli.invoke(
        app, gate_args(harness_dir, learner, base, cand, "--junit", str(junit), "--markdown", str(md))
    )
    assert result.exit_code == 0, result.output
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == "3" and suite.get("failures") == "0"
    assert [c.get("name") for c in suite.iter("testcase")] == ["quality", "performance", "heldout"]
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
    assert failures["quality"] is None
    assert failures["performance"] is not None and "batch gain" in failures["performance"].get("message")
    assert failures["heldout"] is not None


def test_gate_rejects_a_non_editable_change(harness_dir: Path, cli, learner) -> None:
    base = git.Repo(harness_dir).head.commit.hexsha
    path = harness_dir / "harness.yaml"
    path.write_text(path.read_text().replace("max_steps: 5", "max_steps: 7"))
    repo = git.Repo(harness_dir)
    repo.git.commit("-qam", "touch loop settings")
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
