"""What the host reads back from an external rollout, and how much of the host one may take (issue 26):
links, FIFOs and oversized files planted in ``$HARNESSEVOLVE_OUT`` fail the rollout with their
reason (never read through), and a flooding agent stays inside the documented limits
(``runners/rollout_bounds.py``). Hostile agents are real programs in the bwrap sandbox; the model is
scripted."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from one_rollout import run_rollout

from harnessevolve.core import paths
from harnessevolve.core.atif import Step, Trajectory
from harnessevolve.core.tasks import Check, Task
from harnessevolve.execute.runners import rollout_bounds as bounds
from harnessevolve.harness.load import load_harness

pytestmark = pytest.mark.skipif(not os.access("/usr/bin/bwrap", os.X_OK), reason="needs bubblewrap")

TASK = Task(
    id="out-probe", instruction="Answer.", split="train", checks=(Check(type="answer", expected="x"),)
)
TEMPLATE = paths.builtin_dir("harnesses") / "python-agent"


def harness_with(tmp_path: Path, agent_py: str, *args: str) -> Path:
    root = tmp_path / "harness"
    shutil.copytree(TEMPLATE, root)
    (root / "agent.py").write_text(textwrap.dedent(agent_py))
    doc = yaml.safe_load((root / "harness.yaml").read_text())
    doc["agent"]["command"] = ["python", "/harness/agent.py", *args]
    (root / "harness.yaml").write_text(yaml.safe_dump(doc))
    return root


def rollout(harness_root: Path, model: str = "scripted/out-probe") -> Trajectory:
    return run_rollout(load_harness(harness_root), TASK, model=model)


LINK_AGENT = """
import os, sys
os.symlink(sys.argv[2], os.path.join(os.environ["HARNESSEVOLVE_OUT"], sys.argv[1]))
"""


def test_planted_link_answer_to_a_root_only_file_fails_the_rollout(tmp_path: Path) -> None:
    secret = tmp_path / "root-only"
    secret.write_text("ROOT-ONLY-CONTENT-91d2")
    secret.chmod(0o600)  # root's (or, as a user, ours): the host process could read it, the agent not
    trajectory = rollout(harness_with(tmp_path, LINK_AGENT, "answer.txt", str(secret)))
    extra = trajectory.extra
    assert extra["stop_reason"] == "bad_output" and extra["answer"] is None
    assert "answer.txt is a symbolic link (not followed)" in extra["error"]
    assert "ROOT-ONLY-CONTENT-91d2" not in json.dumps(trajectory.to_dict())


def test_symlink_answer_to_proc_environ_leaks_no_host_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HE_ISOLATION_PROBE", "host-environment-value-5c1f")
    trajectory = rollout(harness_with(tmp_path, LINK_AGENT, "answer.txt", "/proc/self/environ"))
    assert trajectory.extra["stop_reason"] == "bad_output"
    assert "host-environment-value-5c1f" not in json.dumps(trajectory.to_dict())


def test_planted_link_trajectory_to_a_reference_is_not_the_agents(tmp_path: Path) -> None:
    reference = tmp_path / "reference.json"
    steps = (Step(1, "user", "Answer."), Step(2, "agent", "REFERENCE-ANSWER-77"))
    reference.write_text(json.dumps(Trajectory("ref", "ref", "1", "m", steps).to_dict()))
    trajectory = rollout(harness_with(tmp_path, LINK_AGENT, "trajectory.json", str(reference)))
    assert trajectory.extra["stop_reason"] == "bad_output"
    assert "trajectory.json is a symbolic link" in trajectory.extra["error"]
    assert "REFERENCE-ANSWER-77" not in json.dumps(trajectory.to_dict())


FIFO_AGENT = """
import os
os.mkfifo(os.environ["HARNESSEVOLVE_ANSWER"])
"""

BIG_AGENT = """
import os
open(os.environ["HARNESSEVOLVE_ANSWER"], "w").write("x" * (%d + 1))
"""


def test_planted_fifo_answer_fails_without_blocking(tmp_path: Path) -> None:
    trajectory = rollout(harness_with(tmp_path, FIFO_AGENT))
    assert trajectory.extra["stop_reason"] == "bad_output"
    assert "answer.txt is not a regular file" in trajectory.extra["error"]


def test_oversized_answer_fails_with_its_limit(tmp_path: Path) -> None:
    trajectory = rollout(harness_with(tmp_path, BIG_AGENT % bounds.ANSWER_BYTES))
    assert trajectory.extra["stop_reason"] == "bad_output"
    assert f"over its {bounds.ANSWER_BYTES}-byte limit" in trajectory.extra["error"]


FLOOD_AGENT = """
import json, os, sys, urllib.error, urllib.request
out = os.environ["HARNESSEVOLVE_OUT"]
open(os.environ["HARNESSEVOLVE_ANSWER"], "w").write("x")
written = files = 0
try:
    with open(os.path.join(out, "blob"), "wb") as handle:
        for _ in range(96):
            handle.write(b"b" * (1 << 20))
            handle.flush()
            written += 1 << 20
except OSError:
    pass
try:
    os.remove(os.path.join(out, "blob"))
    for i in range(3000):
        open(os.path.join(out, f"f{i}"), "w").close()
        files += 1
except OSError:
    pass
base = os.environ["OPENAI_BASE_URL"]
statuses = []


def post(body):
    request = urllib.request.Request(
        base + "/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            statuses.append(reply.status)
    except urllib.error.HTTPError as exc:
        statuses.append(exc.code)
    except OSError as exc:
        statuses.append(type(exc).__name__)


huge = json.dumps({"model": "x", "messages": [{"role": "user", "content": "y" * (9 << 20)}]}).encode()
for _ in range(3):
    post(huge)
wrong = {"model": "not-this-one", "messages": [{"role": "user", "content": "z" * 100000}]}
wrong = json.dumps(wrong).encode()
for _ in range(60):
    post(wrong)
    if statuses[-1] == 403:  # the endpoint stopped recording: the rollout is over
        break
print(json.dumps({"statuses": statuses, "written": written, "files": files}), flush=True)
"""


def test_flood_rollout_stays_inside_the_documented_host_footprint(tmp_path: Path) -> None:
    before = {p.name for p in Path(tempfile.gettempdir()).glob("he-agent-*")}
    harness = harness_with(tmp_path, FLOOD_AGENT)
    copied = load_harness(harness).files
    trajectory = rollout(harness)
    extra = trajectory.extra
    report = json.loads(extra["agent_output"].strip().splitlines()[-1])
    statuses = report["statuses"]
    assert statuses[:3] == [413, 413, 413]  # refused without being kept
    assert statuses[3:] == [404] * (bounds.REFUSED_CALLS - 3) + [403]
    assert extra["stop_reason"] == "refusal_limit", extra.get("error")
    calls = extra["model_calls"]
    assert len(calls) == bounds.REFUSED_CALLS  # the 33rd and later: refused, not recorded
    assert [c["body"]["bytes"] > bounds.REQUEST_BYTES for c in calls[:3]] == [True] * 3
    assert all(len(c["body"]["sha256"]) == 64 and "new_messages" not in c for c in calls[:3])
    record = len(json.dumps(calls))
    assert record <= bounds.RECORD_BYTES
    size = len(json.dumps(trajectory.to_dict()))
    assert size <= bounds.TRAJECTORY_BYTES
    if os.geteuid() == 0:  # the output folder is a tmpfs of its own only as root
        assert report["written"] <= bounds.out_folder_mb(sum(len(t) for t in copied.values())) << 20
        assert report["files"] <= bounds.out_folder_files(len(copied))
    after = {p.name for p in Path(tempfile.gettempdir()).glob("he-agent-*")}
    assert after <= before  # the output folder went with the rollout
    print(
        f"flood footprint: trajectory {size} B, endpoint record {record} B, out folder took "
        f"{report['written']} B + {report['files']} files, statuses {sorted(set(map(str, statuses)))}"
    )


RECORD_AGENT = """
import json, os, urllib.error, urllib.request
base, model = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_MODEL"]
statuses = []
messages = []
for i in range(8):
    messages.append({"role": "user", "content": str(i) * (3 << 20)})
    body = json.dumps({"model": model, "messages": messages[-1:]}).encode()
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(base + "/chat/completions", data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            statuses.append(reply.status)
    except urllib.error.HTTPError as exc:
        statuses.append(exc.code)
        break
print(json.dumps(statuses), flush=True)
"""


def test_endpoint_record_cap_ends_the_rollout_with_record_limit(tmp_path: Path, scripts) -> None:
    model = scripts("out-record", ["ok"] * 10)
    trajectory = rollout(harness_with(tmp_path, RECORD_AGENT), model=model)
    extra = trajectory.extra
    statuses: list[Any] = json.loads(extra["agent_output"].strip().splitlines()[-1])
    assert statuses[:5] == [200] * 5 and 413 in statuses  # 6 x 3 MiB passes the 16 MiB record
    assert extra["stop_reason"] == "record_limit", extra.get("error")
    assert len(json.dumps(extra["model_calls"])) <= bounds.RECORD_BYTES + (4 << 20)


ERROR_AGENT = """
import json, os, urllib.error, urllib.request
body = json.dumps({"model": os.environ["OPENAI_MODEL"], "messages": [{"role": "user", "content": "hi"}]})
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode())
try:
    urllib.request.urlopen(request, timeout=60).read()
    seen = "answered"
except urllib.error.HTTPError as exc:
    seen = exc.read().decode()
open(os.environ["HARNESSEVOLVE_ANSWER"], "w").write(seen)
"""


def test_provider_errors_reach_the_agent_redacted(tmp_path: Path, scripts, monkeypatch) -> None:
    token = "Qx7vR2mK9pL4tZ8wN3bY6cF1"
    monkeypatch.setenv("UPSTREAM_SESSION", token)  # no secret-looking name: caught by its shape

    def failing(messages: list, tools: list) -> dict:
        raise RuntimeError(f"upstream refused session {token}")

    model = scripts("out-error", failing)
    trajectory = rollout(harness_with(tmp_path, ERROR_AGENT), model=model)
    answer = trajectory.extra["answer"] or ""
    assert "model_error" in answer and "[REDACTED]" in answer, answer  # it saw the error (control)
    assert token not in answer and token not in json.dumps(trajectory.to_dict())
