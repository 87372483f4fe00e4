"""The ``judge`` check: a model reads the conversation and says whether an assertion holds.

For what a state check cannot see: "the agent told the user the refund amount", "the agent asked
for the booking number before changing it". The judge sees only the assertion and the transcript
(``core.conversation.transcript_text``: user turns, agent messages, tool calls, observations cut)
— never workspace files, the task's answer or other checks — and runs outside the sandbox, as a
litellm call like any other (metered, so its cost counts in the run's spend).

Replies are cached on disk, keyed by (model, prompt), in ``$XDG_CACHE_HOME/harnessevolve/judge``
(``diskcache``): the same transcript judged twice costs one call, and a resumed run re-judges
nothing. A judge is less trustworthy than a state check — it can be talked round by what the agent
wrote — so prefer file, command, effect or python checks wherever the state shows the outcome.
A reply with no verdict, or a model error, fails the check with the reason (it never passes).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.conversation import transcript_text
from harnessevolve.core.errors import JudgeUnavailableError
from harnessevolve.core.tasks import Check
from harnessevolve.evaluate.observations import first_line

JUDGE_SYSTEM = (
    "You check one assertion about a conversation between a user and an AI agent (with the agent's "
    "tool calls and their results). Judge only from the transcript. Reply with one JSON object: "
    '{"holds": true or false, "reason": "<one short sentence>"}'
)
TRANSCRIPT_CHARS = 24_000
"""Characters of transcript the judge reads (the end is kept when it is longer)."""


def judge_messages(assertion: str, trajectory: Trajectory) -> list[dict[str, str]]:
    text = transcript_text(trajectory)
    if len(text) > TRANSCRIPT_CHARS:
        text = "[... earlier conversation cut]\n" + text[-TRANSCRIPT_CHARS:]
    user = f"Assertion: {assertion.strip()}\n\nTranscript:\n<<<\n{text}\n>>>"
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def parse_verdict(content: str) -> tuple[bool, str] | None:
    """``(holds, reason)`` from the judge's reply, or None when it gives no verdict."""
    match = re.search(r"\{.*\}", content, re.DOTALL)
    if match:
        try:
            doc = json.loads(match.group(0))
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("holds"), bool):
            return doc["holds"], str(doc.get("reason") or "")[:300]
    words = re.findall(r"\b(true|false|yes|no)\b", content.lower())
    if len(set(words)) == 1:
        return words[0] in ("true", "yes"), ""
    return None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base).expanduser() / "harnessevolve" / "judge"


def cache_key(model: str, messages: list[dict[str, str]]) -> str:
    blob = json.dumps({"model": model, "messages": messages}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _ask(model: str, messages: list[dict[str, str]]) -> str:
    """One judge call on an event loop of its own, quietly: litellm's loggers at ERROR during it,
    and its logging tasks and HTTP clients of that loop settled before the loop ends
    (``models.quiet``), so no warning per call and no "Task was destroyed but it is pending!"."""
    from harnessevolve.models import acomplete
    from harnessevolve.models.quiet import quiet_litellm, settle_loop

    async def call() -> str:
        try:
            reply = await acomplete(model, messages, temperature=0.0)
        finally:
            await settle_loop()
        return reply.content

    with quiet_litellm():
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(call())
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called from inside an event loop
            return pool.submit(contextvars.copy_context().run, asyncio.run, call()).result()


def check_judge(check: Check, trajectory: Trajectory | None) -> tuple[bool, str]:
    """Run one judge check; ``(ok, message)``."""
    if trajectory is None:
        return False, "judge check needs the run's trajectory (none was given)"
    messages = judge_messages(check.assertion, trajectory)
    import diskcache

    key = cache_key(check.model, messages)
    with diskcache.Cache(str(cache_dir())) as cache:
        cached: Any = cache.get(key)
        if cached is None:
            try:
                content = _ask(check.model, messages)
            except Exception as exc:  # noqa: BLE001 - the check could not run: the machine failed
                said = first_line(str(exc))[:200]  # litellm appends a traceback to some errors
                raise JudgeUnavailableError(
                    f"judge {check.model} failed: {type(exc).__name__}: {said}"
                ) from exc
            verdict = parse_verdict(content)
            if verdict is None:
                return False, f"judge {check.model} gave no verdict: {content[:120]!r}"
            cached = {"holds": verdict[0], "reason": verdict[1]}
            cache.set(key, cached)
    holds, reason = bool(cached["holds"]), str(cached["reason"])
    said = f" ({reason})" if reason else ""
    return holds, f"judge {check.model}: {'holds' if holds else 'does not hold'}{said}"
