"""An optional LLM judge for error signals (off unless a model is named: ``diff --judge-model``).

The deterministic rules (``alignment.first_divergence``) decide every signal. The judge, any
litellm model, is shown the two action lists around the divergence, where it is and the taxonomy,
but not the rules' cause (so its agreement with them means something), and answers one JSON
object ``{"cause", "hint", "reference_genuine", "why"}``:

- where the rules are **ambiguous** (the signal names a gap, or its cause is one the rules fall
  back to: ``wrong_argument`` because nothing differed, an ``extra_step`` that is only a harmless
  call, ``wrong_tool`` without tool definitions), a valid cause from the judge replaces the rules'
  cause and its hint is added; elsewhere the rules' cause stands and the judge's view is recorded;
- ``reference_genuine`` says whether the reference looks like a real successful run of the task
  (its calls succeed and do what the user asked), so a bad reference can be spotted.

The view lands in ``ErrorSignal.judge``: ``{"model", "cause", "rules_cause", "agrees", "applied",
"hint", "reference_genuine", "why"}``. Answers are cached on disk by a hash of the model and the
prompt (``JudgeCache``), so asking again costs nothing; ``agreement`` gives the share of signals
where the judge agreed with the rules. A reply that is not the JSON asked for leaves the signal as
the rules made it (``judge.error`` says why); the judge never fails a diff.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.files import atomic_write_json
from harnessevolve.core.signals import BASE_SEVERITY, Cause, ErrorSignal
from harnessevolve.evaluate.alignment import HARMLESS_ONLY, actions, describe

CACHE_VERSION = 1
CONTEXT_ACTIONS = 6

SYSTEM = (
    "You review how an AI agent's failed run diverged from a successful reference run of the same "
    "task. Causes: {causes}. Answer with one JSON object and nothing else: "
    '{{"cause": <one cause>, "hint": <one sentence: what the agent should have done>, '
    '"reference_genuine": <true|false: the reference is a real successful run of the task>, '
    '"why": <one sentence>}}'
)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "harnessevolve" / "signal-judge"


class JudgeCache:
    """Judge answers on disk, one JSON file per (model, prompt) hash."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or default_cache_dir()

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            doc = json.loads(self._path(key).read_text())
        except (OSError, ValueError):
            return None
        return doc.get("answer") if isinstance(doc, dict) and doc.get("version") == CACHE_VERSION else None

    def put(self, key: str, answer: dict[str, Any]) -> None:
        atomic_write_json(self._path(key), {"version": CACHE_VERSION, "answer": answer})


def ambiguous(signal: ErrorSignal) -> bool:
    """Whether the rules had to guess: a gap, or a fallback cause."""
    if signal.gaps:
        return True
    if signal.cause is Cause.WRONG_ARGUMENT and "checker still failed" in signal.hint:
        return True
    return signal.cause is Cause.EXTRA_STEP and HARMLESS_ONLY in signal.hint


def _window(trajectory: Trajectory, step: int | None) -> list[str]:
    listed = actions(trajectory)
    at = next((i for i, a in enumerate(listed) if step is not None and a.step_id >= step), len(listed))
    lo = max(0, at - CONTEXT_ACTIONS // 2)
    lines = []
    for a in listed[lo : lo + CONTEXT_ACTIONS]:
        result = " ".join((a.observation or "").split())[:160]
        lines.append(f"step {a.step_id}: {describe(a)}" + (f" -> {result}" if result else ""))
    return lines


def prompt(signal: ErrorSignal, run: Trajectory, reference: Trajectory) -> list[dict[str, str]]:
    task = next((s.message for s in reference.steps if s.source == "user"), "")
    body = "\n".join(
        [
            f"Task (first user message): {task[:600]}",
            "Run, around the divergence:",
            *_window(run, signal.step),
            "Reference, around the divergence:",
            *_window(reference, signal.reference_step),
            f"The runs first differ at run step {signal.step} (reference step {signal.reference_step}).",
            *(f"Missing from the trajectories: {gap}" for gap in signal.gaps),
            "Which cause explains this divergence?",
        ]
    )
    causes = ", ".join(c.value for c in Cause)
    return [{"role": "system", "content": SYSTEM.format(causes=causes)}, {"role": "user", "content": body}]


def _parse(text: str) -> dict[str, Any]:
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match is None:
        raise ValueError("no JSON object in the reply")
    doc = json.loads(match.group(0))
    if not isinstance(doc, dict):
        raise ValueError("the reply is not a JSON object")
    cause = doc.get("cause")
    if cause not in {c.value for c in Cause}:
        raise ValueError(f"unknown cause {cause!r}")
    genuine = doc.get("reference_genuine")
    return {
        "cause": cause,
        "hint": str(doc.get("hint", ""))[:400],
        "reference_genuine": genuine if isinstance(genuine, bool) else None,
        "why": str(doc.get("why", ""))[:400],
    }


async def _ask(model: str, messages: list[dict[str, str]]) -> str:
    """One call on an event loop of its own (``asyncio.run``): litellm's state on that loop is
    settled before it ends, so no warning per call and no pending task (``models.quiet``)."""
    from harnessevolve.models.call import acomplete
    from harnessevolve.models.quiet import settle_loop

    try:
        reply = await acomplete(model, messages, temperature=0.0, max_tokens=400)
    finally:
        await settle_loop()
    return reply.content


def judge_signal(
    signal: ErrorSignal,
    run: Trajectory,
    reference: Trajectory,
    *,
    model: str,
    cache: JudgeCache | None = None,
) -> ErrorSignal:
    """``signal`` with the judge's view in ``judge`` (and its cause, where the rules were ambiguous)."""
    cache = cache or JudgeCache()
    messages = prompt(signal, run, reference)
    key = hashlib.sha256(json.dumps([model, messages], sort_keys=True).encode()).hexdigest()
    answer = cache.get(key)
    cached = answer is not None
    if answer is None:
        try:
            from harnessevolve.models.quiet import quiet_litellm

            with quiet_litellm():
                answer = _parse(asyncio.run(_ask(model, messages)))
        except Exception as exc:  # noqa: BLE001 -- any provider or reply failure leaves the rules' signal
            view = {"model": model, "error": f"{type(exc).__name__}: {str(exc)[:200]}", "applied": False}
            return replace(signal, judge=view)
        cache.put(key, answer)
    agrees = answer["cause"] == signal.cause.value
    applied = not agrees and ambiguous(signal)
    view = {
        "model": model,
        "cause": answer["cause"],
        "rules_cause": signal.cause.value,
        "agrees": agrees,
        "applied": applied,
        "hint": answer["hint"],
        "reference_genuine": answer["reference_genuine"],
        "why": answer["why"],
        "cached": cached,
    }
    if not applied:
        return replace(signal, judge=view)
    hint = f"{signal.hint} (judge {model}: {answer['hint']})" if answer["hint"] else signal.hint
    cause = Cause(answer["cause"])
    severity = signal.severity * BASE_SEVERITY[cause] / BASE_SEVERITY[signal.cause]
    return replace(signal, cause=cause, severity=severity, hint=hint, judge=view)


def agreement(signals: Iterable[ErrorSignal]) -> float | None:
    """The share of judged signals whose judge agreed with the rules (None: none was judged)."""
    judged = [s.judge for s in signals if s.judge and "agrees" in s.judge]
    return sum(bool(j["agrees"]) for j in judged) / len(judged) if judged else None
