"""Hostile agents against the checks that score them, through `harnessevolve run` (scripted agent).

The agent plants something its task's checker will meet -- Python startup files, a Makefile, a
symlink to a host secret -- and the run scores the task as usual. Nothing may run on the host and
no host secret may reach the saved evaluations. Each class has a positive control: the same plant,
checked the way checks ran before (on the host, HOME = the workspace), does fire, so the probe
would see the hole if it were open.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from check_runners import HostRunner
from run_args import run_args

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.cli.app import app
from harnessevolve.core import paths
from harnessevolve.core.tasks import Task
from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.load import load_harness
from harnessevolve.models.scripted import register_script, unregister_script

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

HARBOR_TASK = paths.builtin_dir("benchmarks") / "harbor-example" / "sum-csv-column"
"""Its tests/test.sh runs ``python3 /tests/check_total.py /app/total.txt``: a checker that starts Python."""
SPLITS = ("train", "validation", "test")


def startup_plant(mark: Path) -> str:
    """A bash command planting Python startup code that appends to ``mark`` (a host path): a ``.pth``
    in ``$HOME``'s user site for every Python 3 version, and sitecustomize/usercustomize in the cwd."""
    payload = shlex.quote(f"import os; open({str(mark)!r}, 'a').write('ran as uid %d\\n' % os.getuid())")
    return (
        'for v in 3.8 3.9 3.10 3.11 3.12 3.13 3.14; do d="$HOME/.local/lib/python$v/site-packages"; '
        f'mkdir -p "$d" && printf "%s\\n" {payload} > "$d/zz_plant.pth"; done; '
        f'printf "%s\\n" {payload} > sitecustomize.py && cp sitecustomize.py usercustomize.py && echo planted'
    )


def scripted(*commands: str) -> Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]:
    """A policy running ``commands`` (one bash call each), then submitting ``done``."""

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn < len(commands):
            return {"tool_calls": [{"name": "bash", "arguments": {"command": commands[turn]}}]}
        return {"tool_calls": [{"name": "submit", "arguments": {"answer": "done"}}]}

    return policy


@pytest.fixture
def policy_name() -> Iterator[str]:
    name = f"hostile-{uuid.uuid4().hex[:8]}"
    yield name
    unregister_script(name)


def harbor_suite(root: Path) -> Path:
    """sum-csv-column three times, one per split (a run needs all three)."""
    suite = root / "suite"
    for split in SPLITS:
        task = suite / f"sum-csv-{split}"
        shutil.copytree(HARBOR_TASK, task)
        toml = (task / "task.toml").read_text().replace("[metadata]", f'[metadata]\nsplit = "{split}"')
        (task / "task.toml").write_text(toml)
    return suite


def native_suite(root: Path, checker: str, setup: str = "a.txt: hello") -> Path:
    """A native benchmark of three tasks (one per split) with the given checker YAML."""
    bench = root / "bench"
    (bench / "tasks").mkdir(parents=True)
    (bench / "benchmark.yaml").write_text("version: 1\nname: hostile\ndescription: hostile checks\n")
    for split in SPLITS:
        (bench / "tasks" / f"t-{split}.yaml").write_text(
            f"version: 1\nid: t-{split}\ninstruction: Do it.\nsplit: {split}\n"
            f"setup:\n  files:\n    {setup}\nchecker:\n{checker}answer: done\n"
        )
    return bench


def run_cli(cli, harness_dir: Path, benchmark: Path, policy: str) -> list[dict[str, Any]]:
    """`harnessevolve run` for one generation on a batch of one; the evaluations it saved."""
    result = cli.invoke(
        app, run_args(harness_dir, f"scripted/{policy}", benchmark=benchmark, generations=1, batch_size=1)
    )
    assert result.exit_code in (0, 1), result.output
    saved = sorted((harness_dir / ".harnessevolve").rglob("evaluations/*/*.json"))
    assert saved, "the run saved no evaluations"
    return [json.loads(p.read_text()) for p in saved]


def rollout_then_check(task: Task, policy: str, runner: HostRunner) -> list[str]:
    """The positive control: the agent loop (sandboxed, as in a run), then the checks on the host."""
    harness = load_harness(paths.builtin_dir("harnesses") / "shell-agent")

    async def go() -> list[str]:
        workspace = await create_workspace(task)
        try:
            trajectory = await run_agent(harness, task, workspace, model=f"scripted/{policy}", seed=0)
            result = run_checks(task, workspace, trajectory.extra.get("answer"), runner=runner)
            return [d.message for d in result.details]
        finally:
            remove_workspace(workspace)

    return asyncio.run(go())


# --- Python startup files: the Must-show ----------------------------------------------------------


def test_python_startup_files_planted_for_a_harbor_checker_never_run_on_the_host(
    cli, harness_dir: Path, tmp_path: Path, policy_name: str
) -> None:
    mark = tmp_path / "host-pwned"
    solve = "awk -F, 'NR > 1 { s += $3 } END { print s }' orders.csv > total.txt"
    register_script(policy_name, scripted(startup_plant(mark), solve))
    evaluations = run_cli(cli, harness_dir, harbor_suite(tmp_path), policy_name)
    assert not mark.exists(), f"planted startup code ran on the host: {mark.read_text()}"
    # The checker did run (python3 check_total.py, in the sandbox, next to the planted files) and
    # scored the solved task as passed: the plant neither ran outside nor broke the scoring.
    train = [e for e in evaluations if e["task_id"] == "sum-csv-train"]
    assert train and all(e["passed"] for e in train), train
    # report --final scores the test split (the same plant, the same checker): still nothing on the host.
    final = cli.invoke(
        app, ["report", "--harness", str(harness_dir), "--final", "--model", f"scripted/{policy_name}"]
    )
    assert final.exit_code == 0, final.output
    assert not mark.exists(), f"planted startup code ran on the host in report --final: {mark.read_text()}"
    tested = [e for e in run_cli_evaluations(harness_dir) if e["task_id"] == "sum-csv-test"]
    assert tested and all(e["passed"] for e in tested), tested


def test_positive_control_the_same_plant_fires_when_the_harbor_checker_runs_on_the_host(
    tmp_path: Path, policy_name: str
) -> None:
    mark = tmp_path / "host-pwned"
    register_script(policy_name, scripted(startup_plant(mark)))
    task = load_benchmark_spec(str(harbor_suite(tmp_path))).task("sum-csv-train")
    rollout_then_check(task, policy_name, HostRunner(legacy_env=True))
    assert mark.exists(), "the control did not fire: the probe could not see the hole"
    assert f"ran as uid {os.getuid()}" in mark.read_text()  # on the host, as us


# --- a Makefile for a checker that runs make ---------------------------------------------------------


def makefile_plant(mark: Path) -> str:
    return f"printf 'check:\\n\\techo pwned > {mark}\\n\\ttrue\\n' > Makefile && echo planted"


def test_a_makefile_planted_for_a_make_checker_never_runs_on_the_host(
    cli, harness_dir: Path, tmp_path: Path, policy_name: str
) -> None:
    mark = tmp_path / "host-pwned"
    register_script(policy_name, scripted(makefile_plant(mark)))
    bench = native_suite(tmp_path, "- type: command\n  run: make -s check\n")
    evaluations = run_cli(cli, harness_dir, bench, policy_name)
    assert not mark.exists()
    assert any("make -s check" in c for e in evaluations for c in e["checks"])  # the checker did run


def test_positive_control_the_planted_makefile_fires_on_the_host(tmp_path: Path, policy_name: str) -> None:
    mark = tmp_path / "host-pwned"
    register_script(policy_name, scripted(makefile_plant(mark)))
    task = load_benchmark_spec(str(native_suite(tmp_path, "- type: command\n  run: make -s check\n")))
    rollout_then_check(task.task("t-train"), policy_name, HostRunner())
    assert mark.read_text() == "pwned\n"


# --- a symlink to a host secret, read by the checker -------------------------------------------------

LEAKY_CHECKS = (
    "- type: file\n  path: answer.txt\n  expected: never\n- type: command\n  run: cat answer.txt; exit 1\n"
)


def test_a_symlink_to_a_host_secret_never_reaches_the_saved_evaluation(
    cli, harness_dir: Path, tmp_path: Path, policy_name: str
) -> None:
    secret = f"SECRET-{uuid.uuid4().hex}"
    secret_file = tmp_path / "secret" / "id_ed25519"
    secret_file.parent.mkdir()
    secret_file.write_text(secret)
    secret_file.chmod(0o600)
    register_script(policy_name, scripted(f"ln -s {secret_file} answer.txt && echo linked"))
    run_cli(cli, harness_dir, native_suite(tmp_path, LEAKY_CHECKS), policy_name)
    for saved in (harness_dir / ".harnessevolve").rglob("*.json"):
        assert secret not in saved.read_text(), saved
    messages = [c for e in run_cli_evaluations(harness_dir) for c in e["checks"]]
    assert any("outside the workspace" in m for m in messages)  # the file check refused the link


def run_cli_evaluations(harness_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in (harness_dir / ".harnessevolve").rglob("evaluations/*/*.json")]


def test_positive_control_the_symlinked_secret_leaks_when_the_check_runs_on_the_host(
    tmp_path: Path, policy_name: str
) -> None:
    secret = f"SECRET-{uuid.uuid4().hex}"
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(secret)
    register_script(policy_name, scripted(f"ln -s {secret_file} answer.txt && echo linked"))
    task = load_benchmark_spec(str(native_suite(tmp_path, LEAKY_CHECKS))).task("t-train")
    messages = rollout_then_check(task, policy_name, HostRunner())
    assert any(secret in m for m in messages)


# --- refs generate scores the agent's submitted command (an effect check) in the sandbox too ---------


def submits(answer: str) -> Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]:
    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {"tool_calls": [{"name": "submit", "arguments": {"answer": answer}}]}

    return policy


def test_refs_generate_runs_the_submitted_command_of_an_effect_check_in_the_sandbox(
    cli, tmp_path: Path, policy_name: str
) -> None:
    mark = tmp_path / "host-pwned"
    register_script(policy_name, submits(f"echo pwned > {mark}; echo hi"))
    bench = native_suite(tmp_path, "- type: effect\n  run: echo hi\n")
    result = cli.invoke(
        app,
        ["refs", "generate", "-b", str(bench), "--model", f"scripted/{policy_name}", "--attempts", "1"]
        + ["--probes", "0", "--task", "t-train", "--out", str(tmp_path / "refs")],
    )
    assert result.exit_code in (0, 1), result.output
    assert not mark.exists(), "the submitted command ran on the host"


def test_positive_control_the_submitted_command_escapes_when_the_effect_check_runs_on_the_host(
    tmp_path: Path,
) -> None:
    mark = tmp_path / "host-pwned"
    task = load_benchmark_spec(str(native_suite(tmp_path, "- type: effect\n  run: echo hi\n"))).task(
        "t-train"
    )
    run_checks(task, tmp_path / "unused", f"echo pwned > {mark}; echo hi", runner=HostRunner())
    assert mark.read_text() == "pwned\n"
