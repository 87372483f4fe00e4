"""Every measurement script under benchmarks/perf/ runs: each runnable script's ``--smoke`` mode in
a subprocess (scripted models or the fake OpenAI server; seconds) exits 0 and prints its figures,
so a refactor cannot silently break a measurement. The scripts that drive the real embedded model
or torch, or several whole runs of the CLI, are marked ``slow``; helper modules that are imported,
not run, are imported here.

A new runnable script (one with ``if __name__ == "__main__":``) must get a smoke entry below, or
name the test that already runs its smoke mode in ``COVERED``."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harnessevolve.core.paths import builtin_dir

PERF = builtin_dir("benchmarks") / "perf"
TESTS = Path(__file__).resolve().parent

SMOKE: dict[str, tuple[list[str], str]] = {
    # script: (its smoke arguments, a regex its output must match: the figures it exists to print)
    "rollout_throughput": (
        ["--smoke"],
        r"(?ms)^\s+4\s+4\s.*\d+\.\d+x$.*^targets at 4 .*^  run 1: harnessevolve .* -> \d+\.\d+x$"
        r".*ceiling, median: \d+% \(target >= 90%: (NOT )?met\)"
        r".*vs DSPy, median: \d+\.\d+x \(target >= 1\.2x: (NOT )?met\)",
    ),
    "sandbox_launch_cost": (["--smoke"], r"(?m)^full\s+\d+\s+\d+\.\d+\s+[+-]\d+\.\d+$"),
    "endpoint_overhead": (["--smoke"], r"endpoint \(via relay\)\s+\d+\.\d+\s+\d+\.\d+\s+[+-]\d"),
    "fake_openai_server": (["--smoke"], r"bash then submit .*maple[^\n]*\n.*\nrequests served: 2"),
    "tool_latency": (["--smoke"], r"shell_tool\s+median\s+\d+\.\d+ ms"),
    "gate_simulation": (["--smoke"], r"false-accept, no-better candidate :\s+\d+\.\d%"),
    "alignment_accuracy": (["--smoke"], r"builtin: step accuracy \d+\.\d%"),
    "divergence_causes": (["smoke"], r"2 failed of 2 \(scripted/policy:gives_up\)"),
    "external_set": (["--smoke"], r"3 runs \(NNNN-run.json"),
    "make_external_set": (["--smoke"], r"labelled runs from \d+ tasks \(nl2bash\)"),
    "rollout_limits": (["--smoke"], r"== processes: 20: \d+\.\d s"),
    "vs_gepa": (["--smoke"], r"test gain: harnessevolve [+-]\d+\.\d pts, GEPA [+-]\d+\.\d pts"),
    "pooled_gate_simulation": (["--smoke"], r"\| no better \| no \| \d+\.\d% \| \d+\.\d% \| \d+\.\d% \|"),
    "gate_replay": (["--smoke"], r"\d+ decisions; agree with the run: default \(pooled \+ unopposed\) \d+"),
    "compare_overhead": (["--smoke"], r"compare \d+\.\d+ s \| by hand \d+\.\d+ s \| ratio \d+\.\d{3}"),
    "rekey_cells": (
        ["--smoke"],
        r"(?s)(?=.*seed/seed-0/result\.json: [0-9a-f]{16} -> [0-9a-f]{16})(?=.*is neither)",
    ),
    "compare_tables": (["--smoke", "README.md"], r"[1-9]\d* compare table\(s\) fresh in 1 file"),
}
SLOW_SMOKE: dict[str, tuple[list[str], str]] = {
    # the real embedded model or torch, or several whole `harnessevolve` runs in subprocesses (minutes)
    "evolve_env": (["--smoke"], r"evolve +seed 0: .*rollouts \d+"),
    "kill_resume": (["--smoke"], r"reference run: \d+\.\d s"),
    "kill_at_events": (["--smoke"], r"run_started\s+\d+\s+\d+\s+same tree"),
    "local_model_speed": (["--smoke"], r"(?i)generation"),
    # the row of pool 2 must say 2 rollouts ran at once (as the child reports it), then the verdict
    "local_pool_speed": (
        ["--smoke"],
        r"(?ms)^\s+2\s+2\s+\d+\.\d{3}\s.*pool 2 vs pool 1 \(its best, \d at once\): \d+\.\d+x",
    ),
    # both rows (plain and lookup 10) and how many of the 3 replayed replies lookup left unchanged
    "lookup_speed": (["--smoke"], r"(?m)^\s+10\s+\d+\.\d\s+\d+\.\d\d\s+\d+\.\d\dx\s+\d/3$"),
    "train_speed": (["--smoke"], r"cpu\s+\d+\s+\d+\s+\d+\.\d+x"),
    "train_gain": (["--smoke"], r"(?i)loss"),
}
COVERED = {
    # script: the test that runs its smoke mode already (in process)
    "efficacy": "test_efficacy.py",
    "agent_proposer_overhead": "test_agent_proposer_overhead.py",
    "component_ablation": "test_component_ablation.py",
}
RUN_BY = {"kill_hook": "kill_at_events"}
"""Entry points that another script runs (``python -m kill_hook ...``): that script's smoke runs them."""
HELPERS = (
    "bfcl_events",
    "bfcl_source",
    "dspy_workload",
    "efficacy_smoke",
    "gepa_arm",
    "harness_arms",
    "kill_hook",
    "nl2bash_runs",
    "perturb_runs",
    "proposer_counts",
    "task_subset",
)


def runnable_scripts() -> set[str]:
    return {p.stem for p in PERF.glob("*.py") if 'if __name__ == "__main__":' in p.read_text()}


def run_smoke(name: str, argv: list[str], figures: str, timeout_s: float) -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HARNESSEVOLVE_LOCAL_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(PERF / f"{name}.py"), *argv],
        cwd=PERF.parents[1],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{name} {' '.join(argv)} exited {done.returncode}:\n{output[-3000:]}"
    assert re.search(figures, done.stdout), f"{name} printed no figures ({figures!r}):\n{output[-3000:]}"


def test_every_runnable_script_has_a_smoke_test() -> None:
    listed = set(SMOKE) | set(SLOW_SMOKE) | set(COVERED) | set(RUN_BY)
    assert runnable_scripts() - listed == set(), "a runnable script without a smoke test"
    assert listed - runnable_scripts() == set(), "a smoke test of a script that is gone or not runnable"
    for name, test_file in COVERED.items():
        assert "--smoke" in (TESTS / test_file).read_text(), f"{test_file} does not run {name} --smoke"
    assert set(RUN_BY.values()) <= set(SMOKE) | set(SLOW_SMOKE)
    modules = {p.stem for p in PERF.glob("*.py")}
    helpers = modules - runnable_scripts() | set(RUN_BY)
    assert helpers == set(HELPERS), "a helper module the import test misses"


@pytest.mark.parametrize("name", HELPERS)
def test_helper_module_imports(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PERF))
    importlib.import_module(name)


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_smoke_mode_runs_and_prints_its_figures(name: str) -> None:
    argv, figures = SMOKE[name]
    run_smoke(name, argv, figures, timeout_s=900)


# The timeouts are hang guards, not timing checks: under `make test-under-load` (4 busy processes
# and 2 xdist workers on 2 cores) train_gain --smoke took 856 s, and past 900 s with a demo beside it.
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW_SMOKE))
def test_smoke_mode_of_a_model_script(name: str) -> None:
    argv, figures = SLOW_SMOKE[name]
    run_smoke(name, argv, figures, timeout_s=2400)


def test_local_pool_speed_refuses_a_figure_that_timed_no_model() -> None:
    """A model name litellm cannot serve makes every rollout fail at once with no tokens: fast, and
    no measurement of the pool. The script says so and exits non-zero instead of printing a ratio."""
    argv = ["--model", "no-provider-model", "--tasks", "1", "--warmup", "1", "--configs", "1x1"]
    done = subprocess.run(
        [sys.executable, str(PERF / "local_pool_speed.py"), *argv],
        cwd=PERF.parents[1],
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode != 0, done.stdout
    assert "1 of 1 rollouts used no model tokens" in done.stderr
    assert "vs pool 1" not in done.stdout
