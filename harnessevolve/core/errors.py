"""Exceptions raised by library code. Only ``cli/`` turns them into messages and exit codes."""

from __future__ import annotations


class HarnessEvolveError(Exception):
    """Base class: a problem the user can fix, with where it is and what to do about it.

    ``file`` and ``field`` (a JSON path like ``loop.max_steps``) locate the problem;
    ``hint`` says what to do. ``exit_code`` is 2 (bad input) unless a subclass says otherwise.
    """

    exit_code = 2
    default_hint = ""

    def __init__(
        self, message: str, *, file: str | None = None, field: str | None = None, hint: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.field = field
        self.hint = hint if hint is not None else self.default_hint

    def one_line(self) -> str:
        where = ": ".join(part for part in (self.file, self.field) if part)
        return f"{where}: {self.message}" if where else self.message


class SchemaError(HarnessEvolveError):
    """A file on disk does not match its JSON Schema (or cannot be parsed at all)."""

    default_hint = "fix the field named above; the schemas live in harnessevolve/schemas/"


class HarnessError(HarnessEvolveError):
    """The harness directory is malformed or cannot be loaded."""

    default_hint = "run `harnessevolve validate DIR` to see every problem"


class HarnessGitError(HarnessEvolveError):
    """The harness's git state forbids the operation (dirty tree, unknown revision, no repo)."""


class BenchmarkError(HarnessEvolveError):
    """Unknown benchmark or task, or a malformed task file."""

    default_hint = (
        "`harnessevolve validate BENCHMARK-FOLDER` lists every problem; the task format is in docs/tasks.md"
    )


class TrajectoryError(HarnessEvolveError):
    """A trajectory file is not valid ATIF."""

    default_hint = "fix the field named above; `harnessevolve traj validate FILE` checks a trajectory"


class GateConfigError(HarnessEvolveError):
    """A gate configuration YAML is malformed."""

    default_hint = "see gates/default.yaml for every key and its meaning"


class ModelError(HarnessEvolveError):
    """A model name cannot be resolved or a scripted model is misconfigured."""


class RunLockedError(HarnessEvolveError):
    """Another run holds the harness's lock."""

    default_hint = "wait for it to finish, or remove the lock file if its process is gone"


class EditError(HarnessEvolveError):
    """An edit operation is malformed or cannot be applied; nothing of its edit list was applied.

    ``index`` is the position of the offending edit in its list (None: the list as a whole),
    ``reason`` what is wrong with it."""

    default_hint = "fix that edit; the operations are described in harnessevolve/schemas/edits.schema.json"

    def __init__(self, reason: str, *, index: int | None = None, file: str | None = None) -> None:
        where = f"edits[{index}]" if index is not None else None
        super().__init__(reason, file=file, field=where)
        self.index = index
        self.reason = reason


class SandboxError(HarnessEvolveError):
    """The sandbox for agent commands is unknown, missing or cannot start on this machine."""

    default_hint = "install bubblewrap (apt-get install bubblewrap) or pass --unsafe-no-sandbox"


class JudgeUnavailableError(HarnessEvolveError):
    """A judge check's model call failed (endpoint down, key refused, timed out): the check could
    not run, so the rollout failed on the machine, not on its agent (``core/infra.py``: ``judge``)."""

    default_hint = "check the judge model's endpoint and key; a run retries such a rollout once"


class OutputPathError(HarnessEvolveError):
    """An output path cannot be written (a directory, under a file, read-only); checked up front."""


class InfraFailureError(HarnessEvolveError):
    """Too many rollouts failed on the machine (sandbox, tool server, endpoint, executor; see
    ``core/infra.py``): the run stops, exit code 3, "the machine failed", not "the agent failed"."""

    exit_code = 3
    default_hint = (
        "fix the machine (sandbox, endpoint, workers) and resume the run with --resume; "
        "`harnessevolve status` lists the failures and their reasons"
    )


class FloorTooHighError(HarnessEvolveError):
    """A do-nothing or trivial agent passes too many of the benchmark's tasks (``validate --floor``)."""

    default_hint = (
        "fix the checkers that pass without work (`harnessevolve validate SUITE --floor` lists them), "
        "or pass --accept-floor when the benchmark means it (e.g. gold that leaves the state unchanged)"
    )
