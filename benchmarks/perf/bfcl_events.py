"""A BFCL task as *events*, built into ATIF trajectories, with the benign variations and the
labels of ``perturb_runs.py``.

A trajectory is built from events (user message, agent message, tool call, or a ``gap`` where a
dropped call was); calls are executed in order against BFCL's tools (``bfcl_source.Backend``)
unless the event carries its own observation. Labels name events, and become ATIF step_ids when
the events are numbered, so a label never depends on what an aligner answers.
"""

from __future__ import annotations

import copy
import json
import random
import re
from typing import Any

from bfcl_source import Backend, BfclTask, is_error

Event = dict[str, Any]
Made = dict[str, Any]
"""One change: its events, label, cause, reference step, where it starts (``cut``), stop reason."""
# read-only by plain English: a call that only looks (the generator's own definition)
READ_ONLY = re.compile(
    r"^(ls|pwd|cat|grep|tail|wc|du|diff|sort|find|mean|max_value|min_value)$"
    r"|^(get|list|display|show|view|search|check|estimate|posting_get|retrieve|view)(_|[A-Z])"
)
FINAL_TEXTS = ("Done.", "I have completed that.", "All set: the requested changes are made.", "Finished.")
NARRATION = ("Let me check the current state first.", "Next, I will take care of the following part.")
GENERIC = ("notes.txt", "summary.md", "archive", "backup", "report_2024.pdf", "alpha", "delta", "user_alex")


def _where(events: list[Event], event: Event) -> int:
    """The index of this very event (``list.index`` compares dicts by value)."""
    return next(i for i, e in enumerate(events) if e is event)


def canonical(name: str, args: dict[str, Any]) -> str:
    def norm(v: Any) -> Any:
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, int | float):
            return float(v)
        if isinstance(v, str):
            return " ".join(v.split())
        if isinstance(v, list | tuple):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in sorted(v.items())}
        return str(v)

    return json.dumps([name, norm(args)], sort_keys=True)


def _strings(value: Any, out: set[str]) -> None:
    if isinstance(value, str) and 0 < len(value) < 60:
        out.add(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and "." in k and len(k) < 40:
                out.add(k)
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


def labelled_step(label: str, target: Event | None, evs: list[Event], step_of: dict[int, int]) -> int | None:
    """The step a label names: ``event`` (the target event's step), ``none`` (no step),
    ``last_call`` (the last call's), ``slot`` (where run and reference first differ step for step,
    see alignment.py: the first step after the last call before the gap ``target``, not before its
    turn's user message). Shared with ``nl2bash_runs``."""
    if label == "event":
        return step_of[id(target)]
    if label == "none":
        return None
    if label == "last_call":
        calls = [e for e in evs if e["t"] == "call"]
        return step_of[id(calls[-1])] if calls else None
    turns = [sum(x["t"] == "user" for x in evs[: i + 1]) for i in range(len(evs))]
    gap = next(i for i, e in enumerate(evs) if e is target)
    before = [i for i in range(gap) if evs[i]["t"] == "call"]
    start = before[-1] + 1 if before else 0
    return next(
        step_of[id(e)]
        for i, e in enumerate(evs[start:], start)
        if e["t"] != "gap" and turns[i] >= turns[gap] and not (turns[i] == turns[gap] and e["t"] == "user")
    )


class TaskEvents:
    def __init__(self, task: BfclTask, definitions: list[dict[str, Any]], style: random.Random) -> None:
        self.task = task
        self.definitions = definitions
        self.schemas = {d["function"]["name"]: d["function"]["parameters"] for d in definitions}
        self.final_messages = style.random() < 0.5
        self.placement = "v1.5" if style.random() < 0.5 else "extra"
        self.finish_stop = not self.final_messages and style.random() < 0.5
        self.events = self._reference_events()
        self.calls = [e for e in self.events if e["t"] == "call"]
        self.keys = {canonical(e["name"], e["args"]) for e in self.calls}
        pool: set[str] = set()
        for e in self.calls:
            _strings(e["args"], pool)
        _strings(task.config, pool)
        self.pool = sorted(pool | set(GENERIC))
        self.ref_doc, self.ref_steps = self._build(self.events, reference=True)

    # --- building ----------------------------------------------------------------------------------

    def _reference_events(self) -> list[Event]:
        events: list[Event] = []
        for t, (text, calls) in enumerate(zip(self.task.turns, self.task.gold, strict=True)):
            events.append({"t": "user", "text": text})
            for name, args in calls:
                events.append({"t": "call", "name": name, "args": args, "ref": True})
            if self.final_messages:
                events.append({"t": "msg", "text": FINAL_TEXTS[t % len(FINAL_TEXTS)], "final": True})
        return events

    def _build(
        self, events: list[Event], *, reference: bool = False, stop: str | None = None
    ) -> tuple[dict[str, Any], dict[int, int]]:
        backend = Backend(self.task)
        steps: list[dict[str, Any]] = []
        step_of: dict[int, int] = {}
        for event in events:
            if event["t"] == "gap":
                continue
            sid = len(steps) + 1
            step_of[id(event)] = sid
            if event["t"] == "user":
                steps.append({"step_id": sid, "source": "user", "message": event["text"]})
            elif event["t"] == "msg":
                steps.append({"step_id": sid, "source": "agent", "message": event["text"]})
            else:
                obs = event.get("obs")
                if obs is None:
                    before = backend.state()
                    obs = backend.call(event["name"], event.get("exec", event["args"]))
                    event["changed"] = backend.state() != before
                event["seen"] = obs
                call_id = f"call_{sid}"
                arguments = event["raw"] if "raw" in event else event["args"]
                steps.append(
                    {
                        "step_id": sid,
                        "source": "agent",
                        "message": "",
                        "tool_calls": [
                            {"tool_call_id": call_id, "function_name": event["name"], "arguments": arguments}
                        ],
                        "observation": {"results": [{"source_call_id": call_id, "content": obs}]},
                    }
                )
        extra: dict[str, Any] = {"task_id": self.task.id}
        if stop:
            extra["stop_reason"] = stop
        elif self.finish_stop:
            extra["stop_reason"] = "completed"
        doc = {
            "schema_version": "ATIF-v1.4",
            "session_id": f"bfcl-{self.task.id}-{'ref' if reference else 'run'}",
            "agent": {
                "name": "bfcl-gold" if reference else "bfcl-perturbed",
                "version": "v4",
                "model_name": "gold",
            },
            "steps": steps,
            "extra": extra,
        }
        return doc, step_of

    def reference_doc(self) -> dict[str, Any]:
        return self.ref_doc

    def _ref_step(self, event: Event | None) -> int | None:
        return None if event is None else self.ref_steps[id(event)]

    # --- values ---------------------------------------------------------------------------------------

    def _prop(self, name: str, key: str) -> dict[str, Any]:
        return self.schemas.get(name, {}).get("properties", {}).get(key, {}) or {}

    def _value(self, prop: dict[str, Any], rng: random.Random) -> Any:
        kind = prop.get("type", "string")
        if prop.get("enum"):
            return rng.choice(prop["enum"])
        if kind == "integer":
            return rng.randint(1, 20)
        if kind in ("float", "number"):
            return rng.choice([1.5, 2.0, 10.0, 42.0])
        if kind == "boolean":
            return True
        if kind in ("array", "list", "tuple"):
            return [rng.choice(self.pool)]
        if kind == "dict":
            return {}
        return rng.choice(self.pool)

    def _other(self, value: Any, prop: dict[str, Any], rng: random.Random) -> Any:
        if isinstance(value, bool):
            return not value
        if isinstance(value, int):
            return value + rng.randint(1, 3)
        if isinstance(value, float):
            return value + rng.choice([1.0, 2.5, 10.0])
        if isinstance(value, str):
            if prop.get("enum"):
                others = [e for e in prop["enum"] if e != value]
                return rng.choice(others) if others else None
            suffix = value.rsplit(".", 1)[1] if "." in value else None
            same_kind = [
                p
                for p in self.pool
                if (("." in p and p.rsplit(".", 1)[1] == suffix) if suffix else "." not in p)
            ]
            others = [p for p in same_kind if p.strip().lower() != value.strip().lower()]
            return rng.choice(others) if others else value + "_old"
        if isinstance(value, list) and value:
            i = rng.randrange(len(value))
            new = self._other(value[i], {}, rng)
            return None if new is None else [*value[:i], new, *value[i + 1 :]]
        return None

    def _fresh_call(self, rng: random.Random, want_read_only: bool, exclude: set[str]) -> Event | None:
        names = [n for n in self.schemas if bool(READ_ONLY.search(n)) == want_read_only]
        rng.shuffle(names)
        for name in names:
            params = self.schemas[name]
            required = params.get("required", [])
            if want_read_only and required:
                continue
            args = {k: self._value(self._prop(name, k), rng) for k in required}
            if canonical(name, args) not in self.keys | exclude:
                return {"t": "call", "name": name, "args": args}
        return None

    # --- benign variations ---

    def _spelled(self, call: Event, rng: random.Random, into: Event, kinds: list[str] | None = None) -> Event:
        """``call`` with its arguments spelled differently (same values): the ``exec`` stays canonical."""
        args = dict(call["args"])
        done = []
        for kind in kinds or ["reordered_keys", "number_form", "whitespace"]:
            if kind == "reordered_keys" and len(args) > 1:
                args = dict(reversed(list(args.items())))
                done.append(kind)
            numbers = [a for a, v in args.items() if isinstance(v, int | float) and not isinstance(v, bool)]
            if kind == "number_form" and numbers:
                a = rng.choice(numbers)
                v = args[a]
                args[a] = float(v) if isinstance(v, int) else (int(v) if float(v).is_integer() else v)
                done.append(kind) if args[a] != v or type(args[a]) is not type(v) else None
            strings = [a for a, v in args.items() if isinstance(v, str) and v.strip()]
            if kind == "whitespace" and strings:
                a = rng.choice(strings)
                args[a] = rng.choice((" {} ", "{}\n", "{}  ")).format(args[a])
                done.append(kind)
        into.update(
            {"args": args, "exec": call.get("exec", call["args"]), "name": call["name"], "benign": done}
        )
        return into

    def _noisy(self, kind: str, made: Made, rng: random.Random) -> dict[str, Any] | None:
        evs = [copy.copy(e) for e in made["events"]]
        twin = {id(o): c for o, c in zip(made["events"], evs, strict=True)}
        label, target = made["label"]
        new_target = twin.get(id(target)) if target is not None else None
        cut = made["cut"]
        correct = [i for i, e in enumerate(evs[:cut]) if e["t"] == "call" and e.get("ref")]
        if not correct:
            return None
        benign: list[str] = []
        wanted = rng.sample(["spelling", "read_only_call", "narration", "retried_error"], rng.randint(1, 3))
        inserts: list[tuple[int, Event]] = []
        for choice in wanted:
            at = rng.choice(correct)
            if choice == "spelling":
                kinds = rng.sample(["reordered_keys", "number_form", "whitespace"], rng.randint(1, 3))
                spelled = self._spelled(evs[at], rng, dict(evs[at]), kinds)
                if spelled["benign"]:
                    evs[at] = spelled
                    benign += spelled["benign"]
            elif choice == "read_only_call":
                extra = self._fresh_call(rng, want_read_only=True, exclude=set())
                if extra is not None:
                    extra["harmless"] = True
                    inserts.append((at, extra))
                    benign.append(choice)
            elif choice == "narration":
                inserts.append((at, {"t": "msg", "text": rng.choice(NARRATION)}))
                benign.append(choice)
            else:
                target = evs[at]
                wrong = self._failing_variant(target, rng)
                if wrong is not None:
                    inserts.append((at, wrong))
                    benign.append(choice)
        for at, event in sorted(inserts, key=lambda p: -p[0]):
            evs.insert(at, event)
        if not benign:
            return None
        made = {**made, "events": evs, "label": (label, new_target)}
        item = self._emit(kind, made, tuple(sorted(set(benign))))
        if item is None:
            return None
        failing = [e for e in evs if e.get("failing")]
        if any(not is_error(e.get("seen", "")) for e in failing):
            return None  # the "failed attempt" did not fail: it would be a real extra step
        return item

    def _failing_variant(self, call: Event, rng: random.Random) -> Event | None:
        strings = [a for a, v in call["args"].items() if isinstance(v, str)]
        if not strings:
            return None
        key = rng.choice(strings)
        return {
            "t": "call",
            "name": call["name"],
            "args": {**call["args"], key: f"missing_{call['args'][key]}"},
            "failing": True,
        }

    # --- labels ---

    def _emit(self, kind: str, made: Made, benign: tuple[str, ...]) -> dict[str, Any] | None:
        evs = made["events"]
        doc, step_of = self._build(evs, stop=made["stop"])
        label, target = made["label"]
        extra = made.get("must_succeed")
        if extra is not None and (is_error(extra.get("seen", "")) or not extra.get("changed")):
            return None  # an unneeded call that failed or changed nothing is not the extra step wanted
        if any(e.get("harmless") and e.get("changed") for e in evs):
            return None  # the "harmless" call changed the tools' state: not a benign variation
        return {
            "kind": kind,
            "cause": made["cause"],
            "step": labelled_step(label, target, evs, step_of),
            "reference_step": made["ref"],
            "benign": list(benign),
            "run": doc,
        }
