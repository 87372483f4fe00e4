"""The ``agent:`` section of harness.yaml: which runner runs the harness, checked at load time.

What can be known before a rollout is refused here, naming ``harness.yaml`` (or the file) and the
field: an agent command whose program is missing or not executable, Python files of the harness
that do not compile, and a mini-swe-agent config that does not parse as YAML, does not fit
mini-swe-agent's own config models or has a template that does not render with a sample task.
Nothing here runs harness code: Python is only compiled, and templates render in Jinja's sandboxed
environment.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from harnessevolve.core.errors import HarnessError
from harnessevolve.harness.agent_env import HARNESS_MOUNT, SYSTEM_PATH, agent_path, agent_python_bin
from harnessevolve.harness.model import AGENT_KINDS, AgentSettings

__all__ = ["HARNESS_MOUNT", "SYSTEM_PATH", "agent_path", "agent_python_bin", "load_agent"]


def load_agent(root: Path, doc: dict[str, Any], files: dict[str, str]) -> AgentSettings:
    """The checked ``agent:`` section (schema-valid already); ``HarnessError`` on the first problem."""
    section = doc.get("agent") or {}
    settings = AgentSettings(
        kind=section.get("kind", "builtin"),
        command=tuple(section.get("command", ())),
        config=section.get("config", ""),
        timeout_s=float(section.get("timeout_s", AgentSettings.timeout_s)),
        output_limit=int(section.get("output_limit", AgentSettings.output_limit)),
        max_model_calls=int(section.get("max_model_calls", AgentSettings.max_model_calls)),
    )
    if settings.kind not in AGENT_KINDS:
        raise HarnessError(
            f"unknown agent kind {settings.kind!r}",
            file="harness.yaml",
            field="agent.kind",
            hint=f"choose one of: {', '.join(AGENT_KINDS)}",
        )
    compile_python(files)
    if settings.kind == "command":
        check_command(root, settings.command)
    elif settings.kind == "mini-swe-agent":
        from harnessevolve.harness.mini_config import check_mini_config

        check_mini_config(root, settings.config, files)
    return settings


def agent_prompt(settings: AgentSettings, files: dict[str, str]) -> str:
    """The prompt text of an agent whose harness names no ``system_prompt`` file: mini-swe-agent's
    system and instance templates (so the quality gate's size caps apply to them); else empty."""
    if settings.kind != "mini-swe-agent":
        return ""
    from harnessevolve.core.documents import load_yaml_text

    doc = load_yaml_text(files[settings.config], file=settings.config, error=HarnessError)  # checked already
    return "\n\n".join(str(doc["agent"].get(k, "")).strip() for k in ("system_template", "instance_template"))


def compile_python(files: dict[str, str]) -> None:
    """Every ``*.py`` of the harness (agent code, hooks) must compile; only parsed, never run."""
    for rel, text in files.items():
        if rel.endswith(".py"):
            try:
                compile(text, rel, "exec")
            except (SyntaxError, ValueError) as exc:
                line = getattr(exc, "lineno", None)
                raise HarnessError(
                    f"Python syntax error: {getattr(exc, 'msg', exc)}",
                    file=rel,
                    field=f"line {line}" if line else "(file)",
                    hint="the agent code must compile before it can run",
                ) from None


def check_command(root: Path, argv: tuple[str, ...]) -> None:
    """The program ``argv[0]`` must exist and be executable where the sandbox will look for it; a
    harness file named as ``/harness/...`` must exist (an argument or the program)."""
    if not argv:
        raise HarnessError(
            "agent.kind is command but agent.command is empty",
            file="harness.yaml",
            field="agent.command",
            hint="give the argv, e.g. command: [python, /harness/agent.py]",
        )
    for index, arg in enumerate(argv):
        if arg == HARNESS_MOUNT or arg.startswith(HARNESS_MOUNT + "/"):
            rel = PurePosixPath(arg).relative_to(HARNESS_MOUNT).as_posix()
            if ".." in PurePosixPath(rel).parts or not (root / rel).is_file():
                raise HarnessError(
                    f"{arg} is not a file of the harness ({rel} does not exist)",
                    file="harness.yaml",
                    field=f"agent.command[{index}]",
                    hint=f"the harness is mounted at {HARNESS_MOUNT}; create {rel} or fix the path",
                )
    program = argv[0]
    if program.startswith(HARNESS_MOUNT + "/"):
        path = root / PurePosixPath(program).relative_to(HARNESS_MOUNT).as_posix()
        if not os.access(path, os.X_OK):
            raise HarnessError(
                f"{program} is not executable",
                file="harness.yaml",
                field="agent.command[0]",
                hint=f"chmod +x {path.relative_to(root)} or run it with an interpreter: [python, {program}]",
            )
        return
    found = shutil.which(program, path=agent_path())
    if found is None:
        raise HarnessError(
            f"agent program {program!r} not found or not executable in the sandbox's PATH ({agent_path()})",
            file="harness.yaml",
            field="agent.command[0]",
            hint="name a program installed in /usr/bin or the Python environment, or a harness file",
        )
