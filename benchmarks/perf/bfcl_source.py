"""BFCL's multi-turn tasks as plain data, and its own tool implementations to execute gold calls.

Reads the ``bfcl-eval`` package (Apache-2.0, https://github.com/ShishirPatil/gorilla) from a
folder holding ``bfcl_eval/`` (an unpacked wheel: ``pip download --no-deps bfcl-eval`` then
``unzip``) or from the installed package: ``data/BFCL_v4_multi_turn_<category>.json`` (the user
turns, initial state, involved tool classes), ``data/possible_answer/...`` (the gold calls per turn,
as Python call strings) and ``data/multi_turn_func_doc/*.json`` (the function documentation).
Calls are executed against ``eval_checker/multi_turn_eval/func_source_code`` so every observation
in the set is what BFCL's tools really answer, errors included.
"""

from __future__ import annotations

import ast
import copy
import importlib
import json
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.adapters.bfcl import CLASS_MODULES

STATELESS = ("MathAPI",)
MAX_OBSERVATION = 4000
Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class BfclTask:
    id: str
    turns: tuple[str, ...]
    gold: tuple[tuple[Call, ...], ...]
    classes: tuple[str, ...]
    config: dict[str, Any]
    excluded: tuple[str, ...]
    long_context: bool


def package_root(path: Path | None) -> Path:
    """The ``bfcl_eval`` folder: under ``path``, or the installed package's."""
    if path is not None:
        root = path / "bfcl_eval" if (path / "bfcl_eval").is_dir() else path
        if not (root / "data").is_dir():
            raise SystemExit(f"{path}: no bfcl_eval/data here (unzip the bfcl-eval wheel first)")
        sys.path.insert(0, str(root.parent))
        return root
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("bfcl-eval is not installed; pass --bfcl DIR (an unzipped bfcl-eval wheel)")
    return Path(next(iter(spec.submodule_search_locations)))


def tool_definitions(root: Path, cls: str) -> list[dict[str, Any]]:
    """The class's functions as OpenAI-style definitions (BFCL's own parameter types kept)."""
    lines = (root / "data" / "multi_turn_func_doc" / f"{CLASS_MODULES[cls]}.json").read_text().splitlines()
    out = []
    for line in lines:
        if line.strip():
            doc = json.loads(line)
            function = {
                "name": doc["name"],
                "description": doc["description"],
                "parameters": doc["parameters"],
            }
            out.append({"type": "function", "function": function})
    return out


def _parse_call(text: str, order: dict[str, list[str]]) -> Call:
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {text}")
    name = node.func.id
    args = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
    for key, value in zip(order.get(name, []), node.args, strict=False):
        args[key] = ast.literal_eval(value)
    return name, args


def load_tasks(root: Path, category: str) -> list[BfclTask]:
    data = root / "data"
    questions = [
        json.loads(x) for x in (data / f"BFCL_v4_multi_turn_{category}.json").read_text().splitlines() if x
    ]
    answers = {
        a["id"]: a["ground_truth"]
        for a in (
            json.loads(x) for x in (data / "possible_answer" / f"BFCL_v4_multi_turn_{category}.json").open()
        )
    }
    tasks = []
    for q in questions:
        classes = tuple(q["involved_classes"])
        if any(c not in CLASS_MODULES for c in classes) or q["id"] not in answers:
            continue
        order = {
            d["function"]["name"]: list(d["function"]["parameters"].get("properties", {}))
            for c in classes
            for d in tool_definitions(root, c)
        }
        try:
            gold = tuple(tuple(_parse_call(c, order) for c in turn) for turn in answers[q["id"]])
        except (ValueError, SyntaxError):
            continue
        turns = tuple(
            " ".join(m["content"] for m in turn if m.get("role") == "user") for turn in q["question"]
        )
        if len(turns) != len(gold) or not all(turns):
            continue
        excluded = tuple(str(f).split(".")[-1] for f in q.get("excluded_function", []) or [])
        excluded = excluded if category == "miss_func" else ()
        tasks.append(
            BfclTask(
                q["id"],
                turns,
                gold,
                classes,
                q.get("initial_config", {}),
                excluded,
                category == "long_context",
            )
        )
    return tasks


class Backend:
    """Fresh instances of a task's tool classes in its initial state; ``call`` runs one call."""

    def __init__(self, task: BfclTask) -> None:
        self.methods: dict[str, Any] = {}
        self.instances: list[Any] = []
        for cls in task.classes:
            module = importlib.import_module(
                f"bfcl_eval.eval_checker.multi_turn_eval.func_source_code.{CLASS_MODULES[cls]}"
            )
            instance = getattr(module, cls)()
            if cls not in STATELESS:
                instance._load_scenario(
                    copy.deepcopy(task.config.get(cls, {})), long_context=task.long_context
                )
            self.instances.append(instance)
            for name in dir(instance):
                if not name.startswith("_") and callable(getattr(instance, name)):
                    self.methods.setdefault(name, getattr(instance, name))

    def state(self) -> bytes:
        """Everything the tools hold (their whole object graph), to tell a call that changes state
        from one that only looks."""
        return pickle.dumps(self.instances)

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        method = self.methods.get(name)
        if method is None:
            return f"Error during execution: name '{name}' is not defined"
        try:
            result = method(**copy.deepcopy(arguments))
        except Exception as exc:  # noqa: BLE001 -- BFCL's tools raise anything; the agent sees it
            return f"Error during execution: {exc}"
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        return text if len(text) <= MAX_OBSERVATION else text[:MAX_OBSERVATION] + " ... [truncated]"


def is_error(observation: str) -> bool:
    """BFCL's own error shapes: ``{"error": ...}`` or an exception during execution."""
    if observation.startswith("Error during execution"):
        return True
    try:
        doc = json.loads(observation)
    except ValueError:
        return False
    return isinstance(doc, dict) and bool(doc.get("error"))
