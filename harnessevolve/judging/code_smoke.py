"""The quality gate's smoke run of changed harness code, in the run's sandbox (``gate.quality.CodeSmoke``).

A scratch workspace gets a copy of the candidate harness (``harness/``) and a task file made from it
(``task.json``, the document an external agent reads: the candidate's prompt, tools and loop
settings, a one-line instruction). Inside the sandbox, with harnessevolve's Python environment
shown read-only, each changed ``.py`` file is loaded as a module named ``harnessevolve_smoke_*``:
an agent script's top level runs (its imports, reading ``$HARNESSEVOLVE_TASK``, building its model
client, defining its functions) but not its ``if __name__ == "__main__"`` loop; a hook module is
imported. The model endpoint it is given (``OPENAI_BASE_URL``) answers nothing: the smoke run
never calls a model. The process is killed after the gate's timeout; the workspace is removed.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from harnessevolve.core.tasks import Task
from harnessevolve.evaluate.checkers import run_process
from harnessevolve.execute.runners.external import task_document
from harnessevolve.execute.workspace import remove_workspace, tool_env
from harnessevolve.gate.quality import SmokeOutcome
from harnessevolve.harness.load import load_harness
from harnessevolve.sandbox.base import Sandbox, resolve_sandbox
from harnessevolve.sandbox.python_paths import python_roots

SMOKE_SCRIPT = """\
import importlib.util, os, sys
root = sys.argv[1]
sys.path.insert(0, root)
for rel in sys.argv[2:]:
    name = "harnessevolve_smoke_" + rel.removesuffix(".py").replace("/", "_").replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, os.path.join(root, rel))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
print("smoke: loaded", len(sys.argv) - 2, "file(s)")
"""
SMOKE_INSTRUCTION = "Smoke test of the harness code: no task."
UNREACHABLE_ENDPOINT = "http://127.0.0.1:9/v1"


class SandboxedCodeSmoke:
    """``CodeSmoke`` in ``sandbox`` (None: the default sandbox)."""

    def __init__(self, sandbox: Sandbox | None = None) -> None:
        self.sandbox = sandbox

    def __call__(self, candidate_dir: Path, paths: tuple[str, ...], timeout_s: float) -> SmokeOutcome:
        sandbox = resolve_sandbox(self.sandbox)
        harness = load_harness(candidate_dir)
        workspace = Path(tempfile.mkdtemp(prefix="he-code-smoke-")).resolve()
        try:
            copy = workspace / "harness"
            for rel, text in harness.files.items():
                (copy / rel).parent.mkdir(parents=True, exist_ok=True)
                (copy / rel).write_text(text, encoding="utf-8")
            task = Task(id="code-smoke", instruction=SMOKE_INSTRUCTION, split="train", checks=())
            model = harness.model or "smoke"
            (workspace / "task.json").write_text(json.dumps(task_document(harness, task, model)))
            env = tool_env(
                workspace,
                {
                    "HARNESSEVOLVE_TASK": str(workspace / "task.json"),
                    "HARNESSEVOLVE_ANSWER": str(workspace / "answer.txt"),
                    "OPENAI_BASE_URL": UNREACHABLE_ENDPOINT,
                    "OPENAI_API_BASE": UNREACHABLE_ENDPOINT,
                    "OPENAI_API_KEY": "harnessevolve-smoke",
                    "OPENAI_MODEL": model,
                },
            )
            command = "exec " + shlex.join(
                [sys.executable, "-I", "-B", "-c", SMOKE_SCRIPT, str(copy), *paths]
            )
            read_only = tuple((Path(root), Path(root)) for root in python_roots())
            with sandbox.launch(command, workspace, env, read_only=read_only) as launch:
                try:
                    run = run_process(
                        list(launch.argv),
                        launch.cwd,
                        dict(launch.env),
                        timeout_s=timeout_s,
                        pass_fds=launch.pass_fds,
                    )
                finally:
                    if launch.cleanup_argv:
                        subprocess.run(
                            list(launch.cleanup_argv), capture_output=True, timeout=30, check=False
                        )
            return SmokeOutcome(run.returncode, run.output)
        finally:
            remove_workspace(workspace)
