"""One rollout of an external agent program: files in, sandboxed process, endpoint, trajectory out.

The agent gets (paths as it sees them inside the sandbox, see ``agent_sandbox``):

- ``HARNESSEVOLVE_TASK``: a JSON file with ``instruction``, ``turns`` (every user turn, the first
  being the instruction), ``context`` (the task's own system context, e.g. a policy; may be
  empty), ``system_prompt`` (that context, then the harness's assembled prompt: system prompt,
  skills, examples), ``tools`` (the harness's tool specs), ``loop`` (its loop settings) and ``model``;
  with runtime components on (docs/runtime.md), ``memory`` (the entries retrieved for this task,
  also appended to ``system_prompt``), ``recovery`` (the rules) and ``progress`` (its settings);
- ``OPENAI_BASE_URL`` (the in-sandbox relay to the endpoint), ``OPENAI_API_KEY`` (a dummy: no
  key enters the sandbox), ``OPENAI_MODEL`` / ``HARNESSEVOLVE_MODEL`` (the one model it may ask for),
  ``HARNESSEVOLVE_MODEL_SOCKET`` (the endpoint's unix socket, for clients that speak HTTP over it);
- ``HARNESSEVOLVE_ANSWER``: where it may write its final answer (else its last model reply without
  tool calls is the answer), ``HARNESSEVOLVE_ATIF``: where it may write its own ATIF trajectory;
- ``HARNESSEVOLVE_NOTES``: with progress on, where it keeps its progress notes (the task file's
  ``progress.tool`` is the ``notes`` tool to offer its model); read back, cut at
  ``progress.max_chars``, into the trajectory's ``extra.progress``;
- ``HARNESSEVOLVE_HARNESS``: the harness, read-only; the workspace as its working directory.

It ends with one of these stop reasons: ``submitted`` (exit 0 with an answer), ``no_answer`` (exit 0
without one), ``agent_crashed`` (non-zero exit), ``agent_timeout`` (past ``agent.timeout_s``),
``output_flood`` (printed more than ``FLOOD_FACTOR`` x ``agent.output_limit`` characters),
``bad_trajectory`` (its ATIF file is not valid ATIF), ``bad_output`` (a file it left for us is a
link, not a regular file, or too large: not read), ``model_refused`` (asked for another model, no
answer), ``budget_exhausted`` / ``step_limit`` / ``refusal_limit`` / ``record_limit`` (the endpoint
refused further calls; the agent gets ``STOP_GRACE_S`` to exit after the refusal, then is killed),
``setup_error`` (it could not be started at all).

What it leaves is bounded and read back warily (``rollout_bounds``, ``rollout_files``): the control
folder, output folder included, is a tmpfs of its own (as root), removed after the rollout; files
are read through a handle on the output folder, never through a link; the trajectory is capped.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harnessevolve import __version__
from harnessevolve.core.atif import Step, Trajectory
from harnessevolve.core.enums import StopReason
from harnessevolve.core.errors import SandboxError, TrajectoryError
from harnessevolve.core.tasks import Task
from harnessevolve.execute.runners import rollout_bounds as bounds
from harnessevolve.execute.runners.agent_process import FLOOD_FACTOR, ProcessResult, run_process
from harnessevolve.execute.runners.agent_sandbox import (
    RELAY,
    SOCKET_NAME,
    AgentPaths,
    agent_sandbox,
    launcher,
)
from harnessevolve.execute.runners.endpoint import ModelEndpoint
from harnessevolve.execute.runners.recorded import merge_metrics, steps_from_calls
from harnessevolve.execute.runners.rollout_files import UnsafeOutput, open_folder, parse_atif, read_regular
from harnessevolve.execute.workspace import tool_env
from harnessevolve.harness.agent_config import agent_path
from harnessevolve.harness.model import Harness
from harnessevolve.sandbox.base import Sandbox, launched, resolve_sandbox
from harnessevolve.sandbox.limits import mount_workspace, unmount_workspace

ANSWER_LIMIT = bounds.ANSWER_BYTES
ATIF_FILE = "trajectory.json"
DUMMY_KEY = "harnessevolve-endpoint-no-key"


@dataclass(frozen=True)
class ExternalAgent:
    """What differs between external runners: the argv and extra environment."""

    kind: str
    version: str
    argv: tuple[str, ...]
    env: dict[str, str]
    name: str
    files: tuple[Path, ...] = ()
    """Files of ours copied into the control folder (``/run/harnessevolve``), e.g. a driver script."""
    record: str = ATIF_FILE
    """The file of the out folder holding the agent's own record of the rollout, if it writes one."""
    convert: Callable[[bytes], Trajectory] | None = None
    """Turns that file's bytes into a trajectory (``extra.answer``, ``extra.stop_hint``); None: it
    is ATIF (``HARNESSEVOLVE_ATIF``)."""


def _write_harness_copy(harness: Harness, target: Path) -> None:
    target.mkdir(mode=0o755)
    for rel, text in harness.files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        path.write_text(text, encoding="utf-8")
        source = harness.root / rel
        executable = source.is_file() and os.stat(source).st_mode & stat.S_IXUSR
        path.chmod(0o755 if executable else 0o644)


def task_document(harness: Harness, task: Task, model: str) -> dict[str, Any]:
    """The task file an external agent reads (``HARNESSEVOLVE_TASK``); with runtime components on,
    also their part (``memory.runtime_document``: retrieved memory is appended to ``system_prompt``)."""
    from harnessevolve.execute.memory import runtime_document

    components = runtime_document(harness, task.opening_text) if harness.runtime.any_on else {}
    section = components.get("memory", {}).get("section", "")
    document = {
        "version": 1,
        "task_id": task.id,
        "instruction": task.instruction,
        "turns": list(getattr(task, "turns", ()) or (task.instruction,)),
        "context": task.context,
        "system_prompt": task.system_message(harness.assembled_prompt() if harness.system_prompt else ""),
        "tools": [
            {**t.openai_schema()["function"], "builtin": t.builtin, "command": t.command}
            for t in harness.tools
        ],
        "loop": asdict(harness.loop),
        "model": model,
        **components,
    }
    if section:
        document["system_prompt"] = f"{document['system_prompt'].rstrip()}\n\n{section}\n"
    return document


class ExternalRunner:
    """Base of the runners that run an agent program (``command``, ``mini-swe-agent``): a subclass
    says which program (``agent``); ``run`` is the ``AgentRunner`` contract."""

    kind: str
    version: str

    def agent(self, harness: Harness, model: str) -> ExternalAgent:
        raise NotImplementedError(f"{type(self).__name__} does not say which agent program it runs")

    async def run(
        self,
        harness: Harness,
        task: Task,
        workspace: Path,
        *,
        model: str,
        seed: int,
        sandbox: Sandbox | None = None,
    ) -> Trajectory:
        """One rollout of the agent program (see the module docstring); never raises for what the
        agent did."""
        agent = self.agent(harness, model)
        rollout = _Rollout(agent, harness, task, model, seed, time.monotonic())

        def setup_failed(calls: list, error: str, stop: str = StopReason.SETUP_ERROR) -> Trajectory:
            return _trajectory(rollout, calls, stop, error=error)

        root = Path(tempfile.mkdtemp(prefix="he-agent-"))
        out_fd: int | None = None
        try:
            harness_bytes = sum(len(t.encode()) for t in harness.files.values())
            mount_workspace(  # as root: a tmpfs of its own, so the out folder cannot fill the host
                root,
                size_mb=bounds.out_folder_mb(harness_bytes),
                files=bounds.out_folder_files(len(harness.files)),
            )
            control = root / "control"
            control.mkdir(mode=0o755)
            (control / "out").mkdir()
            (control / "out").chmod(0o777)  # the sandbox's own uid writes its answer and ATIF here
            out_fd = open_folder(control / "out")  # held: what is read back is read through it
            _write_harness_copy(harness, root / "harness")
            for source in (RELAY, *agent.files):
                shutil.copy(source, control / source.name)
            (control / "task.json").write_text(
                json.dumps(task_document(harness, task, model)), encoding="utf-8"
            )
            try:
                box = agent_sandbox(resolve_sandbox(sandbox), root / "harness", control)
            except SandboxError as exc:  # the machine's failure: infra (core/infra.py)
                return setup_failed(
                    [], f"sandbox_error: {exc.message} ({exc.hint})", StopReason.SANDBOX_ERROR
                )
            endpoint = ModelEndpoint(
                control / SOCKET_NAME,
                model=model,
                seed=seed,
                max_calls=harness.agent.max_model_calls,
                temperature=harness.loop.temperature,
                max_tokens=harness.loop.max_tokens,
                # grammar-constrained tool calls: the embedded provider only, as in the builtin loop
                extra_params={"grammar_tools": True}
                if harness.loop.json_grammar and model.startswith("local/")
                else None,
            )
            async with endpoint:
                env = _agent_env(agent, box.paths, model, workspace)
                argv = [box.paths.inside(a) for a in agent.argv]
                script = launcher(argv, box.paths)
                try:
                    async with launched(
                        box.sandbox, script, workspace, env, read_only=box.read_only
                    ) as launch:
                        result = await run_process(
                            launch.argv,
                            launch.subprocess_options(),
                            timeout_s=harness.agent.timeout_s,
                            limit=harness.agent.output_limit,
                            stopped=endpoint.stopped,
                        )
                        # SIGKILL that no limit of this rollout sent (host OOM killer, an operator)
                        killed = result.exit_code in (-9, 137) and result.ended == "exited"
                        killed = killed and not launch.limits_hit(True)
                except (SandboxError, OSError) as exc:
                    return setup_failed(endpoint.calls, f"sandbox_error: {exc}", StopReason.SANDBOX_ERROR)
            trajectory = _finish(rollout, endpoint, result, out_fd)
            if killed and trajectory.extra.get("stop_reason") == StopReason.AGENT_CRASHED:
                return trajectory.with_extra(infra="killed")
            return trajectory
        finally:
            if out_fd is not None:
                os.close(out_fd)
            unmount_workspace(root)
            shutil.rmtree(root, ignore_errors=True)


def _agent_env(agent: ExternalAgent, paths: AgentPaths, model: str, workspace: Path) -> dict[str, str]:
    env = tool_env(workspace)
    env.update(
        {
            "PATH": agent_path(),
            "OPENAI_API_KEY": DUMMY_KEY,
            "OPENAI_MODEL": model,
            "HARNESSEVOLVE_MODEL": model,
            "HARNESSEVOLVE_MODEL_SOCKET": paths.socket,
            "HARNESSEVOLVE_TASK": f"{paths.control}/task.json",
            "HARNESSEVOLVE_ANSWER": f"{paths.out}/answer.txt",
            "HARNESSEVOLVE_ATIF": f"{paths.out}/trajectory.json",
            "HARNESSEVOLVE_NOTES": f"{paths.out}/notes.txt",
            "HARNESSEVOLVE_OUT": paths.out,
            "HARNESSEVOLVE_HARNESS": paths.harness,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "NO_COLOR": "1",
        }
    )
    env.update(agent.env)
    return env


def _read_answer(out: int) -> str | None:
    data = read_regular(out, "answer.txt", ANSWER_LIMIT)
    return None if data is None else data.decode(errors="replace").strip()


NOTES_FILE_BYTES = 1 << 20
"""A notes file over this is not read (its rollout stands; ``extra.progress.error`` says why)."""


def _read_notes(harness: Harness, out: int) -> dict[str, Any] | None:
    """The progress notes a command agent left in ``$HARNESSEVOLVE_NOTES`` (progress on only), cut
    at ``progress.max_chars`` as the builtin loop's notes are."""
    progress = harness.runtime.progress
    if progress is None:
        return None
    data = read_regular(out, "notes.txt", NOTES_FILE_BYTES)
    if data is None:
        return {"notes": "", "writes": 0}
    return {"notes": data.decode(errors="replace")[: progress.max_chars], "writes": None}


def _read_own(agent: ExternalAgent, out: int) -> Trajectory | None:
    data = read_regular(out, agent.record, bounds.RECORD_FILE_BYTES)
    if data is None:
        return None
    return agent.convert(data) if agent.convert else parse_atif(data, agent.record)


@dataclass(frozen=True)
class _Rollout:
    """What every trajectory of one rollout records besides its calls: the agent program, the
    harness, the task, model and seed, and when it started (``time.monotonic()``)."""

    agent: ExternalAgent
    harness: Harness
    task: Task
    model: str
    seed: int
    started: float


def _finish(rollout: _Rollout, endpoint: ModelEndpoint, result: ProcessResult, out: int) -> Trajectory:
    agent, harness = rollout.agent, rollout.harness
    calls = endpoint.calls
    error: str | None = None
    own: Trajectory | None = None
    bad_atif = None
    unsafe: list[str] = []
    try:
        own = _read_own(agent, out)
    except TrajectoryError as exc:
        bad_atif = f"bad_trajectory: the agent's ATIF file: {exc.one_line()}"
    except UnsafeOutput as exc:
        unsafe.append(str(exc))
    hint = own.extra.get("stop_hint") if own is not None else None
    ended_with = own.extra.get("mini_exit_status") if own is not None else None
    try:
        answer = _read_answer(out)
    except UnsafeOutput as exc:
        unsafe.append(str(exc))
        answer = None
    try:
        notes = _read_notes(harness, out)
    except UnsafeOutput as exc:  # a component that fails is reported; the rollout stands
        notes = {"notes": "", "writes": None, "error": f"notes not read: {exc}"}
    if answer is None and own is not None and isinstance(own.extra.get("answer"), str):
        answer = own.extra["answer"]
    if answer is None:
        finals = [
            c for c in calls if c.reply is not None and not c.reply["tool_calls"] and c.reply["content"]
        ]
        if finals and finals[-1] is [c for c in calls if c.reply is not None][-1]:
            answer = finals[-1].reply["content"].strip()  # type: ignore[index]
    refused = [c for c in calls if c.status == 404]
    failed = [c for c in calls if c.status == 502]
    tail = result.output.strip().splitlines()[-1][:300] if result.output.strip() else "no output"
    stop: str
    if unsafe:
        stop, error = StopReason.BAD_OUTPUT, f"bad_output: {'; '.join(unsafe)}"
        answer = None
    elif endpoint.stop is not None:
        stop, error = endpoint.stop.reason, f"{endpoint.stop.reason}: {endpoint.stop.message}"
    elif result.ended == "timeout":
        stop, error = (
            StopReason.AGENT_TIMEOUT,
            f"agent_timeout: killed after {harness.agent.timeout_s:g}s ({tail})",
        )
    elif result.ended == "flood":
        stop = StopReason.OUTPUT_FLOOD
        cap = harness.agent.output_limit * FLOOD_FACTOR
        error = f"output_flood: killed after printing {result.printed} bytes (limit {cap})"
    elif result.exit_code:
        stop, error = StopReason.AGENT_CRASHED, f"agent_crashed: exit code {result.exit_code}: {tail}"
        if refused:
            error += f" (after {refused[-1].error})"
        elif failed:
            stop, error = StopReason.MODEL_ERROR, f"model_error: {failed[-1].error}; then {error}"
    elif bad_atif:
        stop, error = StopReason.BAD_TRAJECTORY, bad_atif
    elif hint and hint != StopReason.SUBMITTED:
        stop, error = (
            hint,
            f"{hint}: the agent ended with {ended_with or hint} ({tail})",
        )
    elif answer is None and refused:
        stop, error = StopReason.MODEL_REFUSED, f"model_refused: {refused[-1].error}"
    elif answer is None:
        stop, error = StopReason.NO_ANSWER, f"no_answer: the agent exited 0 without an answer ({tail})"
    else:
        stop = StopReason.SUBMITTED
    return _trajectory(
        rollout,
        calls,
        stop,
        error=error,
        answer=answer,
        own=own if not bad_atif else None,
        result=result,
        progress=notes,
    )


def _trajectory(
    rollout: _Rollout,
    calls: list,
    stop: str,
    *,
    error: str | None = None,
    answer: str | None = None,
    own: Trajectory | None = None,
    result: ProcessResult | None = None,
    progress: dict[str, Any] | None = None,
) -> Trajectory:
    agent, harness, task, model = rollout.agent, rollout.harness, rollout.task, rollout.model
    steps = (
        merge_metrics(own.steps, calls)
        if own is not None and own.steps
        else tuple(steps_from_calls(calls, model))
    )
    if not steps:
        steps = (Step(1, "user", task.instruction),)
    answered = [c for c in calls if c.reply is not None]
    spending = [c.usage for c in answered]
    extra: dict[str, Any] = {
        **({k: v for k, v in own.extra.items() if k != "stop_hint"} if own is not None else {}),
        "task_id": task.id,
        "stop_reason": stop,
        "answer": answer,
        "harness": harness.name,
        "harness_hash": harness.content_hash(),
        "seed": rollout.seed,
        "wall_s": round(time.monotonic() - rollout.started, 3),
        "runner": agent.kind,
        "runner_version": agent.version,
        "steps_from": ("agent_atif" if agent.convert is None else agent.name)
        if own is not None
        else "endpoint",
        "model_calls": [c.to_dict() for c in calls],
    }
    if error:
        extra["error"] = error
    if progress is not None:
        extra["progress"] = progress
    if result is not None:
        extra["agent_exit_code"] = result.exit_code
        extra["agent_output"] = result.output
    trajectory = Trajectory(
        session_id=own.session_id if own is not None else uuid.uuid4().hex,
        agent_name=own.agent_name if own is not None else agent.name,
        agent_version=own.agent_version if own is not None else __version__,
        model_name=model,
        steps=steps,
        extra=extra,
        final_metrics={
            "total_prompt_tokens": sum(spent.get("prompt_tokens", 0) for spent in spending),
            "total_completion_tokens": sum(spent.get("completion_tokens", 0) for spent in spending),
            "total_cost_usd": sum(spent.get("cost_usd", 0.0) for spent in spending),
            "total_steps": len(steps),
        },
    )
    return _capped(trajectory, task)


def _capped(trajectory: Trajectory, task: Task) -> Trajectory:
    """``trajectory``, or a summary of it when its JSON is over ``TRAJECTORY_BYTES`` (what the run
    folder keeps of one rollout): its steps cut to the task, each model call to its status."""
    size = len(json.dumps(trajectory.to_dict(), default=str))
    if size <= bounds.TRAJECTORY_BYTES:
        return trajectory
    extra = trajectory.extra
    calls = [
        {k: c[k] for k in ("index", "status", "requested_model", "error") if k in c}
        for c in extra.get("model_calls", [])
    ]
    summary: dict[str, Any] = {
        k: extra[k] for k in ("task_id", "harness", "harness_hash", "seed", "wall_s", "runner") if k in extra
    }
    return Trajectory(
        session_id=trajectory.session_id,
        agent_name=trajectory.agent_name,
        agent_version=trajectory.agent_version,
        model_name=trajectory.model_name,
        steps=(Step(1, "user", task.instruction),),
        extra={
            **summary,
            "stop_reason": StopReason.RECORD_LIMIT,
            "answer": None,
            "error": f"record_limit: the rollout's trajectory was {size} bytes, over its "
            f"{bounds.TRAJECTORY_BYTES}-byte limit; only this summary is kept",
            "model_calls": [{k: v[:300] if isinstance(v, str) else v for k, v in c.items()} for c in calls],
            "agent_output": str(extra.get("agent_output", ""))[-2000:],
        },
        final_metrics=trajectory.final_metrics,
    )
