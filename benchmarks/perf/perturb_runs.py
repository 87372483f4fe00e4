"""One BFCL task's labelled failed runs: each kind of change of ``make_external_set.py``.

The events, their building into ATIF, the benign variations and the labels are in
``bfcl_events.py``.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterator
from typing import Any

from bfcl_events import FINAL_TEXTS, Event, Made, TaskEvents, _where, canonical, is_error

HALLUCINATED = ("{name}_file", "{name}_v2", "get_{name}", "{name}s", "do_{name}", "run_{name}")
ERROR_SHAPES = (
    '{{"error": "{name}: operation failed: resource temporarily unavailable"}}',
    "Error during execution: {name}() failed: [Errno 5] Input/output error",
    'Traceback (most recent call last):\n  File "tool.py", line 12, in {name}\n'
    "RuntimeError: backend unavailable",
    "{name}: internal error\n[exit code 1]",
)
LIMIT_STOPS = ("max_steps", "step_limit", "LimitsExceeded", "max_turns")


class Perturber(TaskEvents):
    # --- perturbations ---------------------------------------------------------------------------------

    def items(self, rng_for: Callable[..., random.Random]) -> Iterator[dict[str, Any]]:
        kinds = (
            "drop", "reorder", "insert", "change_arg", "swap_tool", "hallucinate", "drop_argument",
            "stop_early", "garble", "loop", "ignore_error", "provider_down",
        )  # fmt: skip
        for kind in kinds:
            rng = rng_for(kind)
            order = list(range(len(self.calls) + 1))
            rng.shuffle(order)
            for k in order[:6]:
                made = getattr(self, f"_{kind}")(k, rng)
                if made is None:
                    continue
                clean = self._emit(kind, made, ())
                if clean is None:
                    continue
                yield clean
                noisy = self._noisy(kind, made, rng_for(kind, "noise"))
                if noisy is not None:
                    yield noisy
                break
        yield self._emit("no_setup", self._no_setup(), ())  # type: ignore[misc]

    def _pos(self, event: Event) -> int:
        return next(i for i, e in enumerate(self.events) if e is event)

    def _copy(self) -> tuple[list[Event], dict[int, Event]]:
        """Copies of the reference events, and the map from each original's id to its copy."""
        copies = [copy.deepcopy(e) for e in self.events]
        return copies, {id(o): c for o, c in zip(self.events, copies, strict=True)}

    def _differs(self, a: Event, b: Event | None) -> bool:
        return b is None or canonical(a["name"], a["args"]) != canonical(b["name"], b["args"])

    def _at(self, k: int) -> Event | None:
        return self.calls[k] if 0 <= k < len(self.calls) else None

    def _finish_event(self) -> Event | None:
        finals = [e for e in self.events if e.get("final")]
        return finals[-1] if finals else None

    def _made(self, evs, label, cause, ref, cut, stop=None) -> Made:  # noqa: ANN001
        return {"events": evs, "label": label, "cause": cause, "ref": ref, "cut": cut, "stop": stop}

    def _drop(self, k: int, rng: random.Random) -> Made | None:
        if k >= len(self.calls) - 1 or not self._differs(self.calls[k], self._at(k + 1)):
            return None
        evs, twin = self._copy()
        gap = {"t": "gap"}
        cut = _where(evs, twin[id(self.calls[k])])
        evs[cut] = gap
        return self._made(evs, ("slot", gap), "skipped_step", self._ref_step(self.calls[k]), cut)

    def _reorder(self, k: int, rng: random.Random) -> Made | None:
        a, b = self._at(k), self._at(k + 1)
        if a is None or b is None or not self._differs(a, b) or self._pos(b) != self._pos(a) + 1:
            return None
        if not self._differs(b, self._at(k + 2)) or not self._differs(a, self._at(k + 2)):
            return None
        evs, twin = self._copy()
        i = _where(evs, twin[id(a)])
        evs[i], evs[i + 1] = evs[i + 1], evs[i]
        return self._made(evs, ("slot", evs[i]), "skipped_step", self._ref_step(a), i)

    def _insert(self, k: int, rng: random.Random) -> Made | None:
        extra = self._fresh_call(rng, want_read_only=False, exclude=set())
        if extra is None:
            return None
        evs, twin = self._copy()
        target = self._at(k)
        if target is not None:
            i = _where(evs, twin[id(target)])
        else:
            finish = self._finish_event()
            i = _where(evs, twin[id(finish)]) if finish else len(evs)
        evs.insert(i, extra)
        ref = self._ref_step(target) if target is not None else None
        made = self._made(evs, ("event", extra), "extra_step", ref, i)
        made["must_succeed"] = extra
        return made

    def _replace(self, k: int, new: Event, cause: str) -> Made | None:
        old = self._at(k)
        if old is None or not self._differs(new, old) or not self._differs(new, self._at(k + 1)):
            return None
        if k > 0 and not self._differs(new, self._at(k - 1)):
            return None
        evs, twin = self._copy()
        i = _where(evs, twin[id(old)])
        evs[i] = new
        return self._made(evs, ("event", new), cause, self._ref_step(old), i)

    def _change_arg(self, k: int, rng: random.Random) -> Made | None:
        old = self._at(k)
        if old is None or not old["args"]:
            return None
        key = rng.choice(sorted(old["args"]))
        value = self._other(old["args"][key], self._prop(old["name"], key), rng)
        if value is None:
            return None
        return self._replace(
            k, {"t": "call", "name": old["name"], "args": {**old["args"], key: value}}, "wrong_argument"
        )

    def _swap_tool(self, k: int, rng: random.Random) -> Made | None:
        old = self._at(k)
        if old is None:
            return None
        shared = [n for n in self.schemas if n != old["name"] and set(self._props(n)) & set(old["args"])]
        others = shared or [n for n in self.schemas if n != old["name"]]
        if not others:
            return None
        name = rng.choice(sorted(others))
        required = self.schemas[name].get("required", [])
        args = {k2: old["args"][k2] for k2 in self._props(name) if k2 in old["args"]}
        args.update({r: self._value(self._prop(name, r), rng) for r in required if r not in args})
        return self._replace(k, {"t": "call", "name": name, "args": args}, "wrong_tool")

    def _props(self, name: str) -> dict[str, Any]:
        return self.schemas.get(name, {}).get("properties", {}) or {}

    def _hallucinate(self, k: int, rng: random.Random) -> Made | None:
        old = self._at(k)
        if old is None:
            return None
        name = rng.choice(HALLUCINATED).format(name=old["name"])
        if name in self.schemas:
            return None
        obs = rng.choice(
            (
                f"Error during execution: name '{name}' is not defined",
                f'{{"error": "Unknown function: {name}"}}',
            )
        )
        return self._replace(
            k, {"t": "call", "name": name, "args": dict(old["args"]), "obs": obs}, "unknown_tool"
        )

    def _drop_argument(self, k: int, rng: random.Random) -> Made | None:
        old = self._at(k)
        if old is None:
            return None
        required = [r for r in self.schemas.get(old["name"], {}).get("required", []) if r in old["args"]]
        if not required:
            return None
        key = rng.choice(required)
        args = {a: v for a, v in old["args"].items() if a != key}
        return self._replace(k, {"t": "call", "name": old["name"], "args": args}, "missing_argument")

    def _stop_early(self, k: int, rng: random.Random) -> Made | None:
        old = self._at(k)
        if old is None:
            return None
        evs, twin = self._copy()
        i = _where(evs, twin[id(old)])
        final = {"t": "msg", "text": rng.choice(FINAL_TEXTS)}
        stop = "completed" if self.finish_stop else None
        return self._made(
            [*evs[:i], final], ("event", final), "premature_finish", self._ref_step(old), i, stop
        )

    def _garble(self, k: int, rng: random.Random) -> Made | None:
        old = self._at(k)
        if old is None:
            return None
        text = json.dumps({"name": old["name"], "arguments": old["args"]})
        if rng.random() < 0.5:
            bad = {
                "t": "call",
                "name": old["name"],
                "raw": text[:-2],
                "args": {},
                "obs": "Error: arguments are not valid JSON",
            }
        else:
            shape = rng.choice(("<tool_call>{}</tool_call>", "{}", "I will call it now: {}"))
            bad = {"t": "msg", "text": shape.format(text)}
        evs, twin = self._copy()
        i = _where(evs, twin[id(old)])
        evs.insert(i, bad)
        return self._made(evs, ("event", bad), "format_error", self._ref_step(old), i)

    def _loop(self, k: int, rng: random.Random) -> Made | None:
        old, nxt = self._at(k), self._at(k + 1)
        if old is None or not self._differs(old, nxt):
            return None
        expected = nxt if nxt is not None else self._finish_event()
        if expected is None:
            return None
        evs, twin = self._copy()
        i = _where(evs, twin[id(old)])
        repeats = [
            self._spelled(old, rng, {"t": "call", "name": old["name"]}) for _ in range(rng.randint(3, 5))
        ]
        stop = rng.choice(LIMIT_STOPS)
        return self._made(
            [*evs[: i + 1], *repeats],
            ("event", repeats[0]),
            "step_limit",
            self._ref_step(expected),
            i + 1,
            stop,
        )

    def _ignore_error(self, k: int, rng: random.Random) -> Made | None:
        old, nxt = self._at(k), self._at(k + 1)
        if old is None or nxt is None or not self._differs(old, nxt) or is_error(old.get("seen", "")):
            return None
        evs, twin = self._copy()
        i = _where(evs, twin[id(old)])
        evs[i]["obs"] = rng.choice(ERROR_SHAPES).format(name=old["name"])
        return self._made(evs, ("event", twin[id(nxt)]), "tool_error_ignored", self._ref_step(nxt), i)

    def _provider_down(self, k: int, rng: random.Random) -> Made | None:
        old = self._at(k)
        if old is None or k == 0:
            return None
        evs, twin = self._copy()
        i = _where(evs, twin[id(old)])
        return self._made(evs[:i], ("last_call", None), "model_error", self._ref_step(old), i, "model_error")

    def _no_setup(self) -> Made:
        return self._made(
            [copy.deepcopy(self.events[0])], ("none", None), "setup_error", None, 0, "setup_error"
        )
