"""The world model at run time: forecasts stated before a tool call, checked after it.

The harness's ``world_model.md`` is part of the system prompt (``Harness.assembled_prompt``), with
the instruction to begin each reply that calls a tool with one line ``Expect: <the observation you
expect>``. After the calls ran, each forecast is compared with what the tools returned: the share
of the forecast's words (3 letters or more, lower-cased) found in the observations. A share of
``MATCH_SHARE`` or more counts as a match; a reply with calls and no ``Expect:`` line counts as
no forecast. Everything is kept in the trajectory's ``extra.world_model``: one record per
forecast (agent step, the tools called, expected, the start of the observation, share, match) and the totals
(``forecasts``, ``matches``, ``missing``); forecast accuracy is ``matches / forecasts``.
The comparison is lexical: it says whether the named things turned up, not whether they mean
the same.

Lookahead (``world_model.lookahead: k``, k >= 2): each step samples k replies (the first at the
loop's temperature, the others at ``SAMPLE_TEMPERATURE`` or the loop's if higher); when two or
more distinct tool-call replies come back, the model is shown them, each with its ``Expect:``
forecast, and asked for the number of the one to make (``PICK_PROMPT``, no tools offered); an
unreadable answer picks the first. The chosen reply is the step; its metrics count the tokens
and cost of every call the step made. ``extra.world_model.lookahead`` keeps, per step, how many
candidates were sampled, how many were distinct, which was picked and the picker's reply.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from harnessevolve.execute.loop_state import Component
from harnessevolve.models import ModelReply, acomplete

if TYPE_CHECKING:
    from harnessevolve.execute.loop_state import Actions, QueryLoop, Rollout

MATCH_SHARE = 0.5
SAMPLE_TEMPERATURE = 0.7
PICK_PROMPT = (
    "Candidate next calls, each with the observation it expects:\n{listing}\n"
    "Reply with only the number of the call to make."
)
_EXPECT = re.compile(r"^\s*expect(?:ed)?\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)
_WORD = re.compile(r"[a-z0-9][a-z0-9_.-]{2,}")


def forecast_of(content: str | None) -> str | None:
    """The ``Expect:`` line of a reply, if it has one."""
    found = _EXPECT.search(content or "")
    return found.group(1).strip() if found else None


def overlap(expected: str, observed: str) -> float:
    """Share of the forecast's words found in the observation (0 when it has none)."""
    from bm25s.stopwords import STOPWORDS_EN

    words = set(_WORD.findall(expected.lower())) - set(STOPWORDS_EN)
    if not words:
        return 0.0
    seen = set(_WORD.findall(observed.lower()))
    return len(words & seen) / len(words)


def _describe(reply: ModelReply) -> str:
    calls = ", ".join(f"{c.name}({json.dumps(c.arguments, default=str)})" for c in reply.tool_calls)
    return f"{calls} expects: {forecast_of(reply.content) or '(no forecast)'}"


class WorldModelHooks(Component):
    """Records each forecast and its mismatch; with ``lookahead`` >= 2 picks each step's reply
    among sampled candidates (see the module docstring)."""

    name = "world_model"

    def __init__(self, lookahead: int = 1) -> None:
        self.lookahead = lookahead

    async def around_query(self, loop: QueryLoop) -> ModelReply | None:
        if self.lookahead < 2:
            return None
        rollout = loop.rollout
        candidates: list[ModelReply] = []
        for i in range(self.lookahead):
            if i:
                rollout.next_temperature = max(loop.loop.temperature, SAMPLE_TEMPERATURE)
            candidates.append(await loop.query())
        distinct: dict[str, ModelReply] = {}
        for reply in candidates:
            if reply.tool_calls and not reply.parse_error:
                key = json.dumps(
                    [(c.name, c.arguments) for c in reply.tool_calls], sort_keys=True, default=str
                )
                distinct.setdefault(key, reply)
        options = list(distinct.values())
        spent = list(candidates)
        step = sum(1 for s in rollout.steps() if s.source == "agent") + 1
        record: dict[str, Any] = {"agent_step": step, "sampled": len(candidates), "distinct": len(options)}
        chosen = options[0] if options else candidates[0]
        if len(options) >= 2:
            listing = "\n".join(f"{i + 1}. {_describe(r)}" for i, r in enumerate(options))
            messages = [
                *rollout.transcript.messages(),
                {"role": "user", "content": PICK_PROMPT.format(listing=listing)},
            ]
            index, rollout.model_calls = rollout.model_calls, rollout.model_calls + 1
            pick = await acomplete(
                loop.model, messages, temperature=0.0, max_tokens=16, seed=loop.seed + index
            )
            spent.append(pick)
            number = re.search(r"\d+", pick.content or "")
            picked = int(number.group()) if number and 1 <= int(number.group()) <= len(options) else 1
            chosen = options[picked - 1]
            record.update(picked=picked, pick_reply=(pick.content or "")[:100])
        self._record(rollout).setdefault("lookahead", []).append(record)
        return replace(
            chosen,
            prompt_tokens=sum(r.prompt_tokens for r in spent),
            completion_tokens=sum(r.completion_tokens for r in spent),
            cost_usd=sum(r.cost_usd for r in spent),
        )

    def _record(self, rollout: Rollout) -> dict[str, Any]:
        return rollout.extra.setdefault(
            "world_model", {"forecasts": 0, "matches": 0, "missing": 0, "records": []}
        )

    async def after_actions(self, rollout: Rollout, reply: ModelReply, actions: Actions) -> None:
        if not actions.calls or actions.submitted:
            return
        record = self._record(rollout)
        expected = forecast_of(reply.content)
        if expected is None:
            record["missing"] += 1
            return
        observed = "\n".join(o.content for o in actions.observations)
        share = overlap(expected, observed)
        match = share >= MATCH_SHARE
        record["forecasts"] += 1
        record["matches"] += int(match)
        step = sum(1 for s in rollout.steps() if s.source == "agent") + 1
        record["records"].append(
            {
                "agent_step": step,
                "tools": [c.function_name for c in actions.calls],
                "expected": expected[:300],
                "observed": observed[:300],
                "share": round(share, 3),
                "match": match,
            }
        )
