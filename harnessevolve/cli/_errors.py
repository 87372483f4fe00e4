"""Library exceptions -> one-line message, a hint, an exit code. ``HARNESSEVOLVE_DEBUG=1`` re-raises."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.redact import redact

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INFRA, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
"""Exit codes: 0 ok; 1 a gate failed / the run found nothing; 2 bad input (a config, a benchmark
whose floor is too high, a checker that passes everything: ``validate --floor``); 3 the machine
failed (more than ``--max-infra-share`` of the rollouts failed on the sandbox, tool server,
endpoint or executor: ``InfraFailureError``, ``core/infra.py``); 130 interrupted (Ctrl-C, SIGTERM)."""

err_console = Console(stderr=True, highlight=False, soft_wrap=True)
F = TypeVar("F", bound=Callable[..., Any])


def debug() -> bool:
    return os.environ.get("HARNESSEVOLVE_DEBUG", "") not in ("", "0")


def fail(message: str, hint: str = "", code: int = EXIT_BAD_INPUT) -> typer.Exit:
    err_console.print(f"[bold red]Error:[/] {message}", markup=True, highlight=False)
    if hint:
        err_console.print("[dim]Hint:[/] " + hint.replace("[", r"\["))  # hints name extras: [train]
    return typer.Exit(code)


def interrupted_message(exc: BaseException) -> str:
    """Where a Ctrl-C (or SIGTERM) stopped the command, and how to go on."""
    from harnessevolve.core.interrupts import Interrupted

    if not isinstance(exc, Interrupted):
        return "Interrupted; nothing more was done."
    p = exc.point
    return (
        f"Interrupted ({exc.signal_name}) in generation {p.generation}, stage {p.stage}; run {p.run_id} "
        f"recorded run_interrupted in {p.run_dir}/ledger.jsonl. Resume it with: "
        f"harnessevolve run -H {p.harness_dir} --resume {p.run_id}"
    )


def handle_errors(command: F) -> F:
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except HarnessEvolveError as exc:
            if debug():
                raise
            raise fail(redact(exc.one_line()).replace("[", r"\["), redact(exc.hint), exc.exit_code) from None
        except KeyboardInterrupt as exc:
            if debug():
                raise
            err_console.print(interrupted_message(exc), markup=False)
            raise typer.Exit(EXIT_INTERRUPTED) from None

    return wrapper  # type: ignore[return-value]
