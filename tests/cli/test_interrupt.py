"""Ctrl-C as a terminal sends it: SIGINT to the whole process group of a real `harnessevolve run`
(git helpers included), once or twice, and SIGTERM to the main process. Each ends with exit 130,
an "Interrupted ..." line saying where it stopped, `run_interrupted` in the ledger, and a run that
`--resume` (by an id prefix) finishes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harnessevolve.cli.app import app

SLOW_POLICY = """
import time
from harnessevolve.models.policy import learner

def agent(messages, tools):
    time.sleep(0.03)
    return learner(messages, tools)
"""


def events(run_dir: Path) -> list[dict]:
    path = run_dir / "ledger.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip().endswith("}")]


def start_run(tmp_path: Path, harness: Path) -> tuple[subprocess.Popen[str], Path]:
    (tmp_path / "slowpolicy.py").write_text(SLOW_POLICY)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH", "")) if p)
    args = [sys.executable, "-m", "harnessevolve", "run", "-H", str(harness), "-b", "shell-basics"]
    args += ["-n", "3", "--batch-size", "4", "-m", "scripted/slowpolicy:agent", "--no-cache"]
    proc = subprocess.Popen(
        args,
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job has
    )
    runs = harness / ".harnessevolve" / "runs"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = sorted(runs.glob("*")) if runs.is_dir() else []
        # Well inside the loop: the seed is measured and the second generation is under way.
        if found and sum(e["event"] == "generation_started" for e in events(found[-1])) >= 2:
            return proc, found[-1]
        if proc.poll() is not None:
            pytest.fail(f"the run ended before the signal: {proc.communicate()}")
        time.sleep(0.03)
    proc.kill()
    pytest.fail("the run never reached its second generation")


@pytest.mark.parametrize(
    "how", ["process group SIGINT", "process group SIGINT twice", "SIGTERM to the main process"]
)
def test_a_signal_ends_the_run_with_130_and_resume_finishes_it(
    tmp_path: Path, harness_dir: Path, cli, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc, run_dir = start_run(tmp_path, harness_dir)
    monkeypatch.syspath_prepend(str(tmp_path))  # the resume below runs the same policy in-process
    if how.startswith("process group"):
        os.killpg(proc.pid, signal.SIGINT)
        if how.endswith("twice"):
            time.sleep(0.02)
            os.killpg(proc.pid, signal.SIGINT)
    else:
        os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    sent = "SIGTERM" if "SIGTERM" in how else "SIGINT"
    assert f"Interrupted ({sent}) in generation" in err, err
    assert f"--resume {run_dir.name}" in err and "Traceback" not in err, err
    last = events(run_dir)[-1]
    assert last["event"] == "run_interrupted" and last["signal"] == sent, last
    assert last["rev"] and last["stage"] in err

    status = cli.invoke(app, ["status", "-H", str(harness_dir), "--json"])
    assert json.loads(status.output)["state"] == "interrupted", status.output

    resumed = cli.invoke(app, ["run", "-H", str(harness_dir), "--resume", run_dir.name[:-3]])
    assert resumed.exit_code in (0, 1), resumed.output
    assert events(run_dir)[-1]["event"] == "run_finished"
    # The summary shows the whole run: the generation finished before the signal, and its usage.
    rows = [line for line in resumed.output.splitlines() if line.startswith("│ 1 ")]
    assert rows and "-" not in rows[0].split("│")[2].strip()[:1], resumed.output
    assert "│ baseline " in resumed.output, resumed.output
    assert any(e["event"] == "run_resumed" for e in events(run_dir))
