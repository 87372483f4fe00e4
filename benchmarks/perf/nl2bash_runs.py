"""A second, differently shaped source for the external set: NL2Bash gold commands (PyPI ``icalfa``,
InterCode-ALFA, MIT) as OpenAI chat conversations, imported through harnessevolve's own importer.

Each reference is 2-4 NL2Bash queries of one file system asked as successive user turns; the agent
answers each with one ``bash`` call (``{"command": GOLD, "timeout": 30}``) and a short reply; the
request's ``tools`` (bash, python, read_file) become the ATIF tool definitions. Commands are not
executed: a successful call's observation is empty, as a command with no output prints nothing.
The failed runs are the reference changed in one known way (the kinds of
``make_external_set.py``), clean and with benign variations before the divergence (argument keys
in another order, ``30.0`` for ``30``, doubled spaces or a trailing newline in the command, a
``./`` before a path, narration, a read-only ``ls``/``pwd``, a mistyped command that failed and was
retried right). Labels use the step convention of ``harnessevolve/evaluate/alignment.py`` and are
computed from the change alone.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bfcl_events import labelled_step

from harnessevolve.core.openai_chat import from_messages

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a bash command in the workspace.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout": {"type": "integer", "default": 30},
                },
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "python",
            "description": "Run Python code.",
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string"}},
                "required": ["code"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
]
REPLIES = ("Done.", "Here is the result.", "That is finished.")
ERRORS = (
    "bash: line 1: {prog}: command not found\n[exit code 127]",
    "{prog}: cannot access 'missing': No such file or directory\n[exit code 2]",
    'Traceback (most recent call last):\n  File "<stdin>", line 1\nPermissionError: [Errno 13] denied',
)
HALLUCINATED = ("shell", "run_command", "execute_bash", "terminal")
MUTATING = ("touch scratch.tmp", "mkdir -p tmp_work", "rm -f notes.bak", "echo x > marker.txt")
WORDS = ("alpha", "report", "backup", "data", "notes", "final")


def load_queries(root: Path) -> dict[int, list[dict[str, Any]]]:
    """icalfa's tasks by file system: ``query`` and ``gold`` command."""
    out = {}
    for n in range(1, 6):
        rows = json.loads((root / "assets" / "datasets" / f"nl2bash_fs_{n}.json").read_text())
        out[n] = [r for r in rows if r.get("gold") and r.get("query") and "\n" not in r["gold"]]
    return out


def _call(command: str, **extra: Any) -> dict[str, Any]:
    return {"t": "call", "name": "bash", "args": {"command": command, "timeout": 30}, **extra}


class Nl2BashTask:
    def __init__(self, task_id: str, queries: list[dict[str, Any]]) -> None:
        self.id = task_id
        self.events: list[dict[str, Any]] = []
        for t, q in enumerate(queries):
            self.events += [{"t": "user", "text": q["query"]}, _call(q["gold"], ref=True)]
            self.events.append({"t": "msg", "text": REPLIES[t % len(REPLIES)], "final": True})
        self.calls = [e for e in self.events if e["t"] == "call"]

    # --- building ---

    def build(
        self, events: list[dict[str, Any]], stop: str | None = None
    ) -> tuple[dict[str, Any], dict[int, int]]:
        """The OpenAI chat document, imported to ATIF; the map event id -> step_id."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a shell assistant."}]
        step_of: dict[int, int] = {}
        step = 1
        for event in events:
            if event["t"] == "gap":
                continue
            step += 1
            step_of[id(event)] = step
            if event["t"] == "user":
                messages.append({"role": "user", "content": event["text"]})
            elif event["t"] == "msg":
                messages.append({"role": "assistant", "content": event["text"]})
            else:
                call_id = f"call_{step}"
                arguments = event.get("raw", json.dumps(event["args"]))
                function = {"name": event["name"], "arguments": arguments}
                messages.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
                    }
                )
                messages.append({"role": "tool", "tool_call_id": call_id, "content": event.get("obs", "")})
        trajectory = from_messages({"messages": messages, "tools": TOOLS}, session_id=f"nl2bash-{self.id}")
        extra: dict[str, Any] = {"task_id": self.id}
        if stop:
            extra["stop_reason"] = stop
        return trajectory.with_extra(**extra).to_dict(), step_of

    # --- the changes ---

    def _copy(self) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]]]:
        copies = [copy.deepcopy(e) for e in self.events]
        return copies, {id(o): c for o, c in zip(self.events, copies, strict=True)}

    def items(self, rng_for: Callable[..., random.Random]) -> Iterator[dict[str, Any]]:
        ref_doc, ref_steps = self.build(self.events)
        self.reference, self.ref_steps = ref_doc, ref_steps
        for kind in (
            "drop", "reorder", "insert", "change_arg", "swap_tool", "hallucinate", "drop_argument",
            "stop_early", "garble", "loop", "ignore_error", "provider_down",
        ):  # fmt: skip
            rng = rng_for(kind)
            order = list(range(len(self.calls)))
            rng.shuffle(order)
            for k in order:
                made = getattr(self, f"_{kind}")(k, rng)
                if made is None:
                    continue
                yield self._emit(kind, made, [])
                noisy = self._noisy(made, rng_for(kind, "noise"))
                if noisy is not None:
                    yield self._emit(kind, *noisy)
                break
        evs = [copy.deepcopy(self.events[0])]
        yield self._emit(
            "no_setup",
            {
                "events": evs,
                "label": ("none", None),
                "cause": "setup_error",
                "ref": None,
                "cut": 0,
                "stop": "setup_error",
            },
            [],
        )

    def _made(self, evs, label, cause, ref_event, cut, stop=None) -> dict[str, Any]:  # noqa: ANN001
        ref = self.ref_steps[id(ref_event)] if ref_event is not None else None
        return {"events": evs, "label": label, "cause": cause, "ref": ref, "cut": cut, "stop": stop}

    def _index(self, evs: list[dict[str, Any]], event: dict[str, Any]) -> int:
        return next(i for i, e in enumerate(evs) if e is event)

    def _drop(self, k: int, rng: random.Random) -> dict[str, Any] | None:
        if k == len(self.calls) - 1 or self.calls[k]["args"] == self.calls[k + 1]["args"]:
            return None
        evs, twin = self._copy()
        i = self._index(evs, twin[id(self.calls[k])])
        gap = {"t": "gap"}
        evs[i] = gap
        return self._made(evs, ("slot", gap), "skipped_step", self.calls[k], i)

    def _reorder(self, k: int, rng: random.Random) -> dict[str, Any] | None:
        return None  # one call per turn: a swap across turns is two skipped calls, not a reorder

    def _insert(self, k: int, rng: random.Random) -> dict[str, Any] | None:
        evs, twin = self._copy()
        i = self._index(evs, twin[id(self.calls[k])])
        extra = _call(rng.choice(MUTATING))
        evs.insert(i, extra)
        return self._made(evs, ("event", extra), "extra_step", self.calls[k], i)

    def _replace(self, k: int, new: dict[str, Any], cause: str) -> dict[str, Any]:
        evs, twin = self._copy()
        i = self._index(evs, twin[id(self.calls[k])])
        evs[i] = new
        return self._made(evs, ("event", new), cause, self.calls[k], i)

    def _change_arg(self, k: int, rng: random.Random) -> dict[str, Any] | None:
        command = self.calls[k]["args"]["command"]
        words = re.findall(r"[A-Za-z0-9_./-]+", command)[1:]
        candidates = [w for w in words if not w.startswith("-") and (("/" in w) or ("." in w) or w.isdigit())]
        if not candidates:
            return None
        old = rng.choice(candidates)
        new = (
            str(int(old) + rng.randint(1, 9))
            if old.isdigit()
            else re.sub(r"[A-Za-z0-9_]+(?=[^/]*$)", rng.choice(WORDS), old, count=1)
        )
        if new == old:
            return None
        changed = re.sub(rf"(?<![A-Za-z0-9_./-]){re.escape(old)}(?![A-Za-z0-9_./-])", new, command, count=1)
        if changed == command:
            return None
        return self._replace(k, _call(changed), "wrong_argument")

    def _swap_tool(self, k: int, rng: random.Random) -> dict[str, Any] | None:
        command = self.calls[k]["args"]["command"]
        code = f"import subprocess; subprocess.run({command!r}, shell=True)"
        return self._replace(k, {"t": "call", "name": "python", "args": {"code": code}}, "wrong_tool")

    def _hallucinate(self, k: int, rng: random.Random) -> dict[str, Any] | None:
        name = rng.choice(HALLUCINATED)
        new = {
            "t": "call",
            "name": name,
            "args": dict(self.calls[k]["args"]),
            "obs": f"Error: unknown tool '{name}'",
        }
        return self._replace(k, new, "unknown_tool")

    def _drop_argument(self, k: int, rng: random.Random) -> dict[str, Any] | None:
        new = {
            "t": "call",
            "name": "bash",
            "args": {"timeout": 30},
            "obs": "Error: missing required argument 'command'",
        }
        return self._replace(k, new, "missing_argument")

    def _stop_early(self, k: int, rng: random.Random) -> dict[str, Any] | None:
        evs, twin = self._copy()
        i = self._index(evs, twin[id(self.calls[k])])
        final = {"t": "msg", "text": "I am done."}
        return self._made([*evs[:i], final], ("event", final), "premature_finish", self.calls[k], i)

    def _garble(self, k: int, rng: random.Random) -> dict[str, Any] | None:
        evs, twin = self._copy()
        i = self._index(evs, twin[id(self.calls[k])])
        text = json.dumps({"name": "bash", "arguments": self.calls[k]["args"]})
        if rng.random() < 0.5:
            bad = {
                "t": "call",
                "name": "bash",
                "args": {},
                "raw": text[:-3],
                "obs": "Error: arguments are not valid JSON",
            }
        else:
            bad = {"t": "msg", "text": f"<tool_call>{text}</tool_call>"}
        evs.insert(i, bad)
        return self._made(evs, ("event", bad), "format_error", self.calls[k], i)

    def _loop(self, k: int, rng: random.Random) -> dict[str, Any] | None:
        evs, twin = self._copy()
        i = self._index(evs, twin[id(self.calls[k])])
        command = self.calls[k]["args"]["command"]
        repeats = [
            _call(rng.choice((command, command + " ", command.replace(" ", "  ", 1))))
            for _ in range(rng.randint(3, 5))
        ]
        nxt = self._next_ref(k)
        stop = rng.choice(("max_steps", "step_limit", "LimitsExceeded"))
        return self._made([*evs[: i + 1], *repeats], ("event", repeats[0]), "step_limit", nxt, i + 1, stop)

    def _next_ref(self, k: int) -> dict[str, Any]:
        """The reference's action after call ``k``: the next call, or its final reply (the finish)."""
        return self.calls[k + 1] if k + 1 < len(self.calls) else self.events[-1]

    def _ignore_error(self, k: int, rng: random.Random) -> dict[str, Any] | None:
        if k == len(self.calls) - 1:
            return None
        evs, twin = self._copy()
        i = self._index(evs, twin[id(self.calls[k])])
        prog = self.calls[k]["args"]["command"].split()[0]
        evs[i]["obs"] = rng.choice(ERRORS).format(prog=prog)
        nxt = self.calls[k + 1]
        return self._made(evs, ("event", twin[id(nxt)]), "tool_error_ignored", nxt, i)

    def _provider_down(self, k: int, rng: random.Random) -> dict[str, Any] | None:
        if k == 0:
            return None
        evs, twin = self._copy()
        i = self._index(evs, twin[id(self.calls[k])])
        return self._made(evs[:i], ("last_call", None), "model_error", self.calls[k], i, "model_error")

    # --- benign variations before the divergence ---

    def _noisy(self, made: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], list[str]] | None:
        evs = [copy.copy(e) for e in made["events"]]
        twin = {id(o): c for o, c in zip(made["events"], evs, strict=True)}
        label, target = made["label"]
        correct = [i for i, e in enumerate(evs[: made["cut"]]) if e["t"] == "call" and e.get("ref")]
        if not correct:
            return None
        benign: list[str] = []
        inserts: list[tuple[int, dict[str, Any]]] = []
        for choice in rng.sample(
            ["spelling", "read_only_call", "narration", "retried_error"], rng.randint(1, 3)
        ):
            at = rng.choice(correct)
            call = evs[at]
            if choice == "spelling":
                args = dict(call["args"])
                kinds = rng.sample(["reordered_keys", "number_form", "whitespace"], rng.randint(1, 3))
                if "reordered_keys" in kinds:
                    args = dict(reversed(list(args.items())))
                if "number_form" in kinds:
                    args["timeout"] = 30.0
                if "whitespace" in kinds:
                    args["command"] = (
                        rng.choice(("{}\n", " {}", "{} ")).format(args["command"]).replace(" ", "  ", 1)
                    )
                evs[at] = {**call, "args": args}
                benign += kinds
            elif choice == "read_only_call":
                golds = {c["args"]["command"].strip() for c in self.calls}
                options = [c for c in ("ls", "pwd", "ls -la", "ls -1") if c not in golds]
                inserts.append((at, _call(rng.choice(options))))
                benign.append(choice)
            elif choice == "narration":
                inserts.append((at, {"t": "msg", "text": "Let me run that."}))
                benign.append(choice)
            else:
                command = call["args"]["command"]
                prog = command.split()[0]
                wrong = _call(
                    prog + prog[-1] + command[len(prog) :],
                    obs=f"bash: line 1: {prog}{prog[-1]}: command not found\n[exit code 127]",
                )
                inserts.append((at, wrong))
                benign.append(choice)
        for at, event in sorted(inserts, key=lambda p: -p[0]):
            evs.insert(at, event)
        new_target = twin.get(id(target)) if target is not None else None
        return {**made, "events": evs, "label": (label, new_target)}, sorted(set(benign))

    def _emit(self, kind: str, made: dict[str, Any], benign: list[str]) -> dict[str, Any]:
        evs = made["events"]
        doc, step_of = self.build(evs, made["stop"])
        label, target = made["label"]
        return {
            "kind": kind,
            "cause": made["cause"],
            "step": labelled_step(label, target, evs, step_of),
            "reference_step": made["ref"],
            "benign": benign,
            "run": doc,
        }


def build_set(root: Path, tasks: int, seed: int, rng_for: Callable[..., random.Random]) -> dict[str, Any]:
    """The container of ``external_set.py``: ``tasks`` conversations of 2-4 queries of one file system."""
    queries = load_queries(root)
    pick = rng_for(seed, "nl2bash", "pick")
    references: dict[str, Any] = {}
    items: list[dict[str, Any]] = []
    for n in range(tasks):
        fs = pick.choice(sorted(queries))
        chosen = pick.sample(queries[fs], min(len(queries[fs]), pick.randint(2, 4)))
        task = Nl2BashTask(f"nl2bash-fs{fs}-{n:03d}", chosen)
        for item in task.items(lambda *p, tid=task.id: rng_for(seed, tid, *p)):
            items.append({"task_id": task.id, **item, "run": _bare(item["run"])})
        references[task.id] = {"classes": ["nl2bash"], "placement": "v1.5", "atif": _bare(task.reference)}
    return {"references": references, "items": items, "tools": {"nl2bash": TOOLS}}


def _bare(doc: dict[str, Any]) -> dict[str, Any]:
    """The document without its tool definitions (the container stores them once)."""
    out = copy.deepcopy(doc)
    out["agent"].pop("tool_definitions", None)
    out["schema_version"] = "ATIF-v1.4"
    return out
