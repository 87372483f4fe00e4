"""A loaded harness as plain frozen data; what the agent loop and the optimizer read."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessevolve.harness.runtime import RuntimeComponents

HARNESS_VERSION = 1
FORECAST_INSTRUCTION = (
    "Before each tool call, write one line `Expect: <the observation you expect>` in your reply."
)
"""Shown after the world model (``world_model`` on): what ``execute/world_model.py`` checks."""
DEFAULT_MODEL = "local/smollm2-135m"


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    builtin: str | None = None
    command: str | None = None

    def openai_schema(self) -> dict[str, Any]:
        """The tool in OpenAI function-calling format."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str


@dataclass(frozen=True)
class LoopSettings:
    """The agent loop's knobs (``harness.yaml: loop``)."""

    max_steps: int = 8
    """Agent turns before the run is stopped with ``step_limit``."""
    temperature: float = 0.0
    max_tokens: int = 256
    """Completion tokens per turn."""
    tool_output_limit: int = 2000
    """Characters of one tool output shown to the model (the rest is cut and marked)."""
    command_timeout_s: float = 20.0
    """Wall-clock limit of one tool command."""
    json_grammar: bool = False
    """Ask the local provider for grammar-constrained JSON tool calls."""
    stop_on_repeat: int = 0
    """End the run when the model makes the same call this many turns in a row (0: never)."""
    observation_note: str = ""
    """Text appended to every tool result the model sees (e.g. a reminder to submit)."""
    final_submit: bool = False
    """When the run reaches the step limit (or ``stop_on_repeat``) without an answer, ask the
    model once more, offering only the submit tool."""
    answer_from: str = ""
    """``TOOL.ARGUMENT`` (e.g. ``bash.command``): when the run still ends without an answer, the
    last call of TOOL's ARGUMENT is submitted (tasks whose answer is a call the agent made);
    recorded as ``extra.answer_from``. Empty: off."""
    answer_check: str = ""
    """``TOOL.ARGUMENT`` (e.g. ``bash.command``): a submit whose answer is none of the arguments
    this run passed to TOOL (when it made such calls) is turned back once: its result says the
    answer must be one of them, naming the last, and the run goes on; a second such submit ends
    the run with the last of them as the answer. For tasks whose answer is a call the agent made,
    not its output or a description of the work. Recorded as ``extra.answer_check`` (``taken``:
    the second time). Empty: off."""
    repair_calls: bool = False
    """Check each tool call against its tool's JSON schema before it runs (``execute/call_repair.py``):
    a near-miss tool or argument name, or a value of the wrong type, is repaired where one reading
    fits; a call missing a required argument is answered with what it needs instead of run.
    Recorded as ``extra.call_repairs``."""
    refuse_placeholders: bool = False
    """Answer a call of a task's tool once instead of running it when a value looks made up and
    appears nowhere in what the agent was told (``'your_password'``, ``'12345'``, a parameter's name
    for its value; ``execute/placeholder_check.py``); the same call made again runs. Recorded as
    ``extra.placeholders``."""
    verify_finish: bool = False
    """Hold back the agent's first attempt to finish (a submit, or a reply ending a multi-turn
    task's turn) once per turn, quoting the request and asking whether every part of it is done
    (``execute/verify_finish.py``); the next attempt finishes. Recorded as ``extra.verify_finish``."""
    check_writes: bool = False
    """After each ``write_file`` call, check what it wrote (``execute/check_writes.py``): a file that
    does not parse as its suffix says (Python, JSON, TOML, shell), Python with a function that holds
    no code, or a file that already held exactly that content, gets a note under the tool's result.
    Run in the sandbox; recorded as ``extra.check_writes``."""


FINAL_SUBMIT_ASK = "You have used all your steps. Call submit now with your final answer."

"""``loop.final_submit``'s last message to the model (only the submit tool is offered with it); the
behaviour proposer's code lever writes the same ask into an agent's own loop."""

ANSWER_CHECK_REPLY = (
    "error: not submitted. The answer must be the exact {argument} you passed to {tool}, not its "
    "output or a description of what you did. Your last {tool} {argument} was:\n{last}\n"
    "Call {submit} again with the {argument} that does what the task asks (run a new one with "
    "{tool} first if none does)."
)
"""``loop.answer_check``'s result for a submit turned back (the last argument cut to 500 characters)."""


AGENT_KINDS = ("builtin", "command", "mini-swe-agent")
"""Runners a harness may name (``harness.yaml: agent.kind``); ``execute/runners`` implements each."""


@dataclass(frozen=True)
class AgentSettings:
    """Which agent runs the harness (``harness.yaml: agent``); see docs/agents.md."""

    kind: str = "builtin"
    """``builtin`` (harnessevolve's own loop), ``command`` (any program) or ``mini-swe-agent``."""
    command: tuple[str, ...] = ()
    """``command``: the agent's argv, run in the sandbox with the workspace as cwd."""
    config: str = ""
    """``mini-swe-agent``: the harness file holding mini-swe-agent's own YAML config."""
    timeout_s: float = 600.0
    """Wall-clock limit of one rollout of an external agent; past it the agent is killed."""
    output_limit: int = 20000
    """Characters of the agent's own stdout/stderr kept in the trajectory (the rest is cut)."""
    max_model_calls: int = 50
    """Model calls one rollout may make through the endpoint; past it each call is refused."""


@dataclass(frozen=True)
class Harness:
    root: Path
    name: str
    model: str
    system_prompt: str
    examples: str
    tools: tuple[ToolSpec, ...]
    skills: tuple[Skill, ...]
    loop: LoopSettings
    editable: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)
    """Every tracked text file of the harness, relative path -> content."""
    description: str = ""
    agent: AgentSettings = field(default_factory=AgentSettings)
    """Which runner runs this harness (default: the builtin loop)."""
    runtime: RuntimeComponents = field(default_factory=RuntimeComponents)
    """The runtime components it turns on (memory, progress, recovery, world model)."""

    def content_hash(self) -> str:
        """Stable hash of the harness files: the identity of what an agent run used."""
        digest = hashlib.sha256()
        for path in sorted(self.files):
            digest.update(path.encode() + b"\0" + self.files[path].encode() + b"\0")
        return digest.hexdigest()[:16]

    def assembled_prompt(self) -> str:
        """System prompt + skills + demonstrations, as the model sees it."""
        parts = [self.system_prompt.strip()]
        if self.skills:
            parts.append(
                "# Skills\n\n"
                + "\n\n".join(f"## {s.name}\n{s.description}\n\n{s.body.strip()}" for s in self.skills)
            )
        if self.examples.strip():
            parts.append("# Examples\n\n" + self.examples.strip())
        if self.runtime.world_model is not None and self.runtime.world_model.text.strip():
            parts.append(
                f"# World model\n\n{self.runtime.world_model.text.strip()}\n\n{FORECAST_INSTRUCTION}"
            )
        return "\n\n".join(parts) + "\n"

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)
