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
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harnessevolve.execute.agent import Actions, Rollout
    from harnessevolve.models import ModelReply

MATCH_SHARE = 0.5
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


class WorldModelHooks:
    """Records each forecast and its mismatch (see the module docstring)."""

    name = "world_model"

    def _record(self, rollout: Rollout) -> dict[str, Any]:
        return rollout.extra.setdefault(
            "world_model", {"forecasts": 0, "matches": 0, "missing": 0, "records": []}
        )

    async def before_query(self, rollout: Rollout) -> None:
        return None

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

    async def on_stop(self, rollout: Rollout, reason: Any) -> None:
        return None
