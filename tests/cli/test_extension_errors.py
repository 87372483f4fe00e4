"""Every user-supplied extension point fails with one line naming it and its error: exit 2, no
traceback, nothing changed (no run folder, no commit, the harness clean)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import git
import pytest

from harnessevolve.cli.app import app
from harnessevolve.runs.events import Baseline, RunFailed

ADAPTERS = """
from harnessevolve.core.tasks import Benchmark

class LoadRaises:
    name = "boom"
    def detect(self, spec):
        return False
    def load(self, spec):
        raise RuntimeError("kaput in load")

class DetectRaises:
    name = "boomd"
    def detect(self, spec):
        raise ValueError("kaput in detect")
    def load(self, spec):
        raise AssertionError("never reached")

class WrongType:
    name = "wrong"
    def detect(self, spec):
        return False
    def load(self, spec):
        return {"tasks": []}
"""


def assert_refused(result, *needles: str) -> str:
    """Exit 2, exactly one error line (naming ``needles``), no traceback; the error line."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    text = " ".join(result.output.split())
    for needle in needles:
        assert needle in text, result.output
    return errors[0]


def assert_unchanged(harness: Path, head: str) -> None:
    repo = git.Repo(harness)
    assert repo.head.commit.hexsha == head and not repo.is_dirty(untracked_files=True)
    assert not (harness / ".harnessevolve" / "runs").exists()


@pytest.mark.parametrize(
    ("ref", "spec", "needles"),
    [
        (
            "ext_adapters:LoadRaises",
            "boom:x",
            ("adapter 'boom'", "load('x') raised RuntimeError: kaput in load"),
        ),
        (
            "ext_adapters:DetectRaises",
            "some-suite",
            ("adapter 'boomd'", "detect('some-suite') raised ValueError"),
        ),
        ("ext_adapters:WrongType", "wrong:x", ("adapter 'wrong'", "returned dict, not a Benchmark")),
    ],
)
def test_an_adapter_that_fails_is_named(
    tmp_path: Path, harness_dir: Path, cli, monkeypatch, ref: str, spec: str, needles: tuple[str, ...]
) -> None:
    (tmp_path / "ext_adapters.py").write_text(ADAPTERS)
    monkeypatch.chdir(tmp_path)
    head = git.Repo(harness_dir).head.commit.hexsha
    result = cli.invoke(app, ["run", "-H", str(harness_dir), "--adapter", ref, "-b", spec, "-n", "1"])
    assert_refused(result, *needles)
    assert_unchanged(harness_dir, head)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("not json at all", "invalid JSON"),
        ('{"content": 5}', "content is int, not a string"),
        ('{"tool_calls": [{"arguments": {}}]}', "tool_calls[0] has no string name"),
        ("[1, 2]", "a reply is a string or an object, not list"),
    ],
)
def test_a_malformed_scripted_reply_file_names_its_line(
    tmp_path: Path, harness_dir: Path, cli, line: str, needle: str
) -> None:
    replies = tmp_path / "replies.jsonl"
    replies.write_text('{"content": "ok"}\n\n' + line + "\n")
    head = git.Repo(harness_dir).head.commit.hexsha
    result = cli.invoke(
        app, ["run", "-H", str(harness_dir), "-b", "shell-basics", "-n", "1", "-m", f"scripted/{replies}"]
    )
    assert_refused(result, str(replies), "line 3", needle)
    assert_unchanged(harness_dir, head)


def test_synthesize_out_under_a_regular_file_is_refused_before_the_work(tmp_path: Path, cli) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = cli.invoke(
        app, ["tasks", "synthesize", "--repo", str(repo), "--out", str(blocker / "sub" / "tasks")]
    )
    assert_refused(result, "--out", f"{blocker} is a file")
    assert blocker.read_text() == "not a folder"


def test_gate_on_a_candidate_with_an_absolute_symlink_names_the_link(harness_dir: Path, cli, learner) -> None:
    from cli.test_gate import gate_args

    repo = git.Repo(harness_dir)
    base = repo.head.commit.hexsha
    os.symlink("/etc/passwd", harness_dir / "prompts" / "leak.md")
    repo.git.add("-A")
    repo.git.commit("-qm", "prompts: a link to a host file")
    candidate = repo.head.commit.hexsha
    result = cli.invoke(app, gate_args(harness_dir, learner, base, candidate))
    assert_refused(result, "prompts/leak.md", "/etc/passwd")
    assert repo.head.commit.hexsha == candidate and not repo.is_dirty(untracked_files=True)


def test_a_broken_seed_is_named_before_the_baseline(tmp_path: Path, cli, learner) -> None:
    harness = tmp_path / "pyagent"
    assert cli.invoke(app, ["init", str(harness), "--template", "python-agent"]).exit_code == 0
    agent = harness / "agent.py"
    agent.write_text(agent.read_text().replace("def main() -> int:\n", "def main() -> int:\n    1 / 0\n"))
    repo = git.Repo(harness)
    repo.git.commit("-qam", "agent: divide by zero")
    head = repo.head.commit.hexsha
    result = cli.invoke(app, ["run", "-H", str(harness), "-b", "shell-basics", "-n", "2", "-m", learner])
    assert_refused(result, "the seed harness is broken", "agent_crashed", "ZeroDivisionError")
    assert repo.head.commit.hexsha == head and not repo.is_dirty(untracked_files=True)
    run_dir = next((harness / ".harnessevolve" / "runs").iterdir())
    names = [json.loads(line)["event"] for line in (run_dir / "ledger.jsonl").read_text().splitlines()]
    assert Baseline.NAME not in names and names[-1] == RunFailed.NAME  # no validation pass was spent
    assert len(list(run_dir.rglob("trajectories/**/*.json"))) == 2  # only the two smoke rollouts
