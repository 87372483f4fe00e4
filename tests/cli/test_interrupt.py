"""Ctrl-C as a terminal sends it: SIGINT to the whole process group of a real `harnessevolve run`
(git helpers included), once or twice, and SIGTERM to the main process. Each ends with exit 130,
an "Interrupted ..." line saying where it stopped, `run_interrupted` in the ledger, and a run that
`--resume` (by an id prefix) finishes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harnessevolve.cli.app import app

SIGNALLING_POLICY = """
import json, os, signal, time
from pathlib import Path

from harnessevolve.core import interrupts
from harnessevolve.models.policy import learner

RUNS = Path(os.environ["HE_TEST_RUNS"])
HOW = os.environ["HE_TEST_SIGNAL"]
fired = []


def second_generation_started():
    found = sorted(RUNS.glob("*")) if RUNS.is_dir() else []
    if not found or not (found[-1] / "ledger.jsonl").is_file():
        return False
    lines = (found[-1] / "ledger.jsonl").read_text().splitlines()
    return sum('"generation_started"' in line for line in lines) >= 2


def agent(messages, tools):
    # The signal is sent from inside the run at a known point (the second generation under way),
    # never after a wall-clock wait: the outcome cannot depend on the machine's speed.
    if HOW != "none" and not fired and second_generation_started():
        fired.append(HOW)
        if HOW == "SIGTERM to the main process":
            os.kill(os.getpid(), signal.SIGTERM)
        else:
            os.killpg(os.getpgrp(), signal.SIGINT)
            if HOW.endswith("twice"):
                while not interrupts.received():  # the first has been handled: the run is stopping
                    time.sleep(0.001)
                os.killpg(os.getpgrp(), signal.SIGINT)  # a second Ctrl-C while it unwinds
    return learner(messages, tools)
"""


def events(run_dir: Path) -> list[dict]:
    path = run_dir / "ledger.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip().endswith("}")]


def run_until_signalled(tmp_path: Path, harness: Path, how: str) -> tuple[subprocess.Popen[str], Path]:
    """A real `harnessevolve run` in its own process group whose policy signals it (``how``) once
    the second generation is under way; the run folder."""
    (tmp_path / "signalling.py").write_text(SIGNALLING_POLICY)
    runs = harness / ".harnessevolve" / "runs"
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HE_TEST_RUNS": str(runs),
        "HE_TEST_SIGNAL": how,
    }
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH", "")) if p)
    args = [sys.executable, "-m", "harnessevolve", "run", "-H", str(harness), "-b", "shell-basics"]
    args += ["-n", "3", "--batch-size", "4", "-m", "scripted/signalling:agent", "--no-cache"]
    proc = subprocess.Popen(
        args,
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job has
    )
    return proc, runs


@pytest.mark.parametrize(
    "how", ["process group SIGINT", "process group SIGINT twice", "SIGTERM to the main process"]
)
def test_a_signal_ends_the_run_with_130_and_resume_finishes_it(
    tmp_path: Path, harness_dir: Path, cli, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc, runs = run_until_signalled(tmp_path, harness_dir, how)
    monkeypatch.syspath_prepend(str(tmp_path))  # the resume below runs the same policy in-process
    monkeypatch.setenv("HE_TEST_RUNS", str(runs))
    monkeypatch.setenv("HE_TEST_SIGNAL", "none")  # the resumed run, in this process, is never signalled
    out, err = proc.communicate(timeout=1800)  # a safety net only: the signal comes from inside
    assert proc.returncode == 130, (out, err)
    (run_dir,) = runs.iterdir()
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
