"""Ctrl-C in the middle of a comparison whose tasks run Python tools: every rollout closes its
tool server (killed and reaped) before the command exits 130 — no "Event loop is closed"
tracebacks from processes reaped after the loop closed (seen on a BFCL cell), nothing left running."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SIGNALLING_AGENT = """
import os, signal, time
from pathlib import Path

CALLS = Path(os.environ["HE_TEST_CALLS"])


def agent(messages, tools):
    with CALLS.open("a") as f:
        f.write("call\\n")
    if len(CALLS.read_text().splitlines()) == 4:  # from inside, at a known point
        os.killpg(os.getpgrp(), signal.SIGINT)
    time.sleep(0.2)  # other rollouts stay mid-call, their tool servers up
    return {"tool_calls": [{"name": "listCart", "arguments": {}}]}
"""


def tool_bench(root: Path, copies: int = 8) -> Path:
    """tool-use-example's cart task, ``copies`` times, all in the test split."""
    bench = root / "bench"
    shutil.copytree(REPO / "benchmarks" / "tool-use-example", bench)
    meta = bench / "benchmark.yaml"
    meta.write_text(meta.read_text().replace("name: tool-use-example", "name: carts"))  # no references
    source = bench / "tasks" / "cart-total.yaml"
    doc = yaml.safe_load(source.read_text())
    for path in (bench / "tasks").glob("*.yaml"):
        path.unlink()
    for i in range(copies):
        doc.update(id=f"cart-{i}", split="test")
        (bench / "tasks" / f"cart-{i}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return bench


def test_ctrl_c_mid_cell_reaps_every_tool_server_and_prints_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "signalling.py").write_text(SIGNALLING_AGENT)
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "model": "scripted/signalling:agent",
                "benchmark": str(tool_bench(tmp_path)),
                "harness": {"template": "tool-agent"},
                "seeds": [0],
                "arms": [{"kind": "seed"}],
            }
        )
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HE_TEST_CALLS": str(tmp_path / "calls")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH", "")) if p)
    args = [
        sys.executable,
        "-m",
        "harnessevolve",
        "compare",
        "run",
        str(plan),
        "--out",
        str(tmp_path / "out"),
    ]
    done = subprocess.run(
        args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, start_new_session=True
    )
    assert done.returncode == 130, (done.stdout, done.stderr)
    assert "Interrupted;" in done.stdout + done.stderr
    for noise in ("Traceback", "Exception ignored", "Event loop is closed", "that handles pid"):
        assert noise not in done.stderr, done.stderr
    assert not (tmp_path / "out" / "cells" / "seed" / "seed-0" / "result.json").exists()
