"""Values that cross stages, as ``str`` enums: each member *is* its string, so the JSON on disk (ledger,
trajectories, reports) holds the same plain strings it always did and old files read unchanged."""

from __future__ import annotations

from enum import StrEnum


class StopReason(StrEnum):
    """Why a rollout ended (``extra.stop_reason`` of its trajectory)."""

    SUBMITTED = "submitted"
    STEP_LIMIT = "step_limit"
    REPEATED = "repeated"
    MODEL_ERROR = "model_error"
    SETUP_ERROR = "setup_error"
    WORKSPACE_TOO_LARGE = "workspace_too_large"
    EXECUTOR_ERROR = "executor_error"
    # External agents (``execute/runners``: command, mini-swe-agent)
    NO_ANSWER = "no_answer"
    """The agent exited 0 without an answer."""
    AGENT_CRASHED = "agent_crashed"
    """The agent exited non-zero (or could not start its relay)."""
    AGENT_TIMEOUT = "agent_timeout"
    """The agent ran past ``agent.timeout_s`` and was killed."""
    OUTPUT_FLOOD = "output_flood"
    """The agent printed far more than ``agent.output_limit`` and was killed."""
    BAD_TRAJECTORY = "bad_trajectory"
    """The ATIF file the agent wrote is not valid ATIF."""
    MODEL_REFUSED = "model_refused"
    """The agent asked the endpoint for a model it was not given, and gave no answer."""
    FORMAT_ERROR = "format_error"
    """mini-swe-agent ended after repeated replies without a valid tool call."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """The run's budget was spent mid-rollout: the endpoint refused further calls."""
    BAD_OUTPUT = "bad_output"
    """A file the agent left for the host (answer, its trajectory) is a link, not a regular file,
    or over its size limit: not read (``execute/runners/rollout_files.py``)."""
    REFUSAL_LIMIT = "refusal_limit"
    """The endpoint refused too many of the agent's requests (``rollout_bounds.REFUSED_CALLS``)."""
    RECORD_LIMIT = "record_limit"
    """What the rollout asked of its endpoint, or its trajectory, passed its size cap."""
    ENDED = "ended"
    """A multi-turn task: the agent ended its last user turn, or the simulated user stopped."""
    USER_TURN_LIMIT = "user_turn_limit"
    """The simulated user reached ``max_turns`` without writing its stop token."""
    USER_ERROR = "user_error"
    """The simulated user's model failed or wrote nothing."""
    TOOL_ERROR = "tool_error"
    """The task's tool server could not start (bad module, set-up that raised, MCP failure)."""
    SANDBOX_ERROR = "sandbox_error"
    """The sandbox could not start the rollout (its workspace or a command): a machine failure
    (``core/infra.py``), never the agent's."""


INFRASTRUCTURE_STOPS = frozenset(
    {
        StopReason.MODEL_ERROR,
        StopReason.SETUP_ERROR,
        StopReason.BUDGET_EXHAUSTED,
        StopReason.SANDBOX_ERROR,
        StopReason.EXECUTOR_ERROR,
    }
)
"""Stops that say nothing about the harness (a provider or set-up failure, a spent budget): never
cached, never a signal for an edit."""


BROKEN_AGENT_STOPS = frozenset({StopReason.AGENT_CRASHED, StopReason.BAD_TRAJECTORY, StopReason.OUTPUT_FLOOD})
"""Stops that say an external agent's own code is broken (it crashed, wrote garbage ATIF, flooded):
a smoke run that hits one fails the candidate before a batch is spent on it."""


class Verdict(StrEnum):
    """What became of a candidate (the report's badge, the ``Verdict:`` trailer's first word)."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    """Judged and not kept, never committed (K > 1: lost to another, or failed a gate)."""
    REVERTED = "reverted"
    """Committed, then reverted by a gate."""
    PENDING = "pending"
    """Committed, no decision recorded yet (a run killed in between)."""


class Outcome(StrEnum):
    """A gate decision's outcome; ``continue`` only from a sequential test that wants more pairs."""

    ACCEPT = "accept"
    REJECT = "reject"
    CONTINUE = "continue"


class RunEnd(StrEnum):
    """How a run's ledger ends (``status`` shows these as the run's state)."""

    FINISHED = "finished"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class Stage(StrEnum):
    """Where a run is (``RunState.stage``, ``stage`` of budget/failure events, usage by stage)."""

    BASELINE = "baseline"
    EXECUTE = "execute"
    EVALUATE = "evaluate"
    OPTIMIZE = "optimize"
    EVOLVE = "evolve"
    """Making harder train tasks (``--evolve-environments``)."""
    GATE = "gate"
    COMMIT = "commit"
    TRAIN = "train"
    TRAIN_EVAL = "train_eval"
    EPOCH_END = "epoch_end"
    FINISHED = "finished"


class Sampling(StrEnum):
    """How a generation's minibatch is drawn (``--sampling``; ``pipeline/policies.py``)."""

    UNIFORM = "uniform"
    REGRET = "regret"
    """Prefer tasks solvable but not yet solved (the benchmark's regret.json)."""


class ExecutorName(StrEnum):
    """Where rollouts are scheduled (``--executor``; ``execute/executors.py`` ``EXECUTORS``)."""

    LOCAL = "local"
    PROCESSES = "processes"
    """Worker processes on this machine, one asyncio loop each (``execute/process_executor.py``)."""
    RAY = "ray"


class SandboxName(StrEnum):
    """Where agent commands run (``--sandbox``; ``sandbox/base.py`` ``SANDBOXES``)."""

    BWRAP = "bwrap"
    DOCKER = "docker"
    NONE = "none"
    """No isolation: only with ``--unsafe-no-sandbox``."""


class TrackerName(StrEnum):
    """Experiment trackers a run can mirror its ledger into (``--track``)."""

    MLFLOW = "mlflow"
