"""BFCL v4 multi-turn tasks from the ``bfcl-eval`` package (Apache-2.0), run by harnessevolve.

``pip install 'harnessevolve[bfcl]'`` (``bfcl-eval`` without its dependencies: only its data
files and its pure-Python backends are used; see docs/adapters.md). Specs:

- ``bfcl`` -- the first ``DEFAULT_COUNT`` tasks of ``multi_turn_base`` (small enough for tests);
- ``bfcl:base``, ``bfcl:miss_param``, ``bfcl:long_context`` -- a whole category (200 tasks each);
- ``bfcl:base:0-29``, ``bfcl:base:3,7,12`` -- tasks by index within a category.

Each BFCL entry becomes one task:

- **turns**: each of BFCL's user turns (its messages' contents joined), delivered one at a time;
- **tools**: the functions of the entry's ``involved_classes`` from BFCL's own function docs,
  minus ``excluded_function``, with BFCL's parameter types mapped to JSON Schema (``dict`` ->
  object, ``float`` -> number, ``tuple`` -> array, ``any`` -> no type);
- **implementations**: BFCL's real backends (``GorillaFileSystem``, ``TwitterAPI``, ...) as
  ``module:Class.method`` Python tools, one instance per class per rollout, set up with the entry's
  ``initial_config`` through the backend's ``_load_scenario`` (as BFCL does);
- **checker**: one per-turn ``python`` check (``bfcl_runtime/bfcl_check.py``) that applies BFCL's
  own ``state_checker`` and ``response_checker`` after every turn;
- **gold**: BFCL's ground-truth calls per turn (positional arguments named from the backend's
  method signature, read with ``ast``), replayed by ``refs import``.

``miss_func`` is not offered: it adds tools in the middle of a conversation, and a task's tool set
is fixed for the rollout. Loading reads only JSON and parses the backends' source; nothing of
BFCL runs in harnessevolve's process.
"""

from __future__ import annotations

import ast
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from harnessevolve.adapters.suite import AdaptedBenchmark, assign_splits
from harnessevolve.core import paths
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.python_refs import module_file
from harnessevolve.core.task_tools import ObjectSetup, TaskTool
from harnessevolve.core.tasks import Check, GoldCall, Task

CATEGORIES = ("base", "miss_param", "long_context")
DEFAULT_COUNT = 30
BACKENDS = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
CLASS_MODULES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}
STATELESS = ("MathAPI",)
RUNTIME = Path(__file__).with_name("bfcl_runtime")
"""Holds ``bfcl_check.py``, the checker run in the sandbox (the tasks' ``python_path``)."""
TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "int": "integer"}
INSTALL_HINT = "pip install 'harnessevolve[bfcl]' (bfcl-eval, installed with --no-deps; see docs/adapters.md)"


def data_root() -> Path:
    try:
        root = resources.files("bfcl_eval") / "data"
    except ModuleNotFoundError:
        raise BenchmarkError("bfcl-eval is not installed", field="--benchmark", hint=INSTALL_HINT) from None
    return Path(str(root))


def json_schema(spec: Any) -> Any:
    """BFCL's parameter spec -> JSON Schema (recursively)."""
    if isinstance(spec, list):
        return [json_schema(s) for s in spec]
    if not isinstance(spec, dict):
        return spec
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key == "type":
            if value == "any":
                continue
            out["type"] = TYPES.get(value, value)
        elif key in ("properties",) and isinstance(value, dict):
            out[key] = {name: json_schema(v) for name, v in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = json_schema(value)
        else:
            out[key] = value
    if out.get("type") == "array" and "items" not in out:
        out["items"] = {}
    return out


@lru_cache(maxsize=16)
def function_docs(cls: str) -> tuple[dict[str, Any], ...]:
    path = data_root() / "multi_turn_func_doc" / DOC_FILES[cls]
    return tuple(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


@lru_cache(maxsize=16)
def method_arguments(cls: str) -> dict[str, list[str]]:
    """Method name -> its parameter names in order, read from the backend's source with ``ast``."""
    module = f"{BACKENDS}.{CLASS_MODULES[cls]}"
    path = module_file(module, ())
    if path is None or path.suffix != ".py":
        raise BenchmarkError(f"BFCL backend {module} not found", field="--benchmark", hint=INSTALL_HINT)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return {
                f.name: [a.arg for a in f.args.args[1:]] for f in node.body if isinstance(f, ast.FunctionDef)
            }
    raise BenchmarkError(f"class {cls} not found in {path}", field="--benchmark", hint=INSTALL_HINT)


def parse_gold(call: str, owners: dict[str, str], *, task_id: str, turn: int) -> GoldCall:
    """``"mv(source='a', destination='b')"`` -> GoldCall (positional arguments named)."""
    try:
        node = ast.parse(call.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError("not a plain function call")
        name = node.func.id
        arguments = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        if node.args:
            order = method_arguments(owners[name])[name]
            arguments.update({order[i]: ast.literal_eval(a) for i, a in enumerate(node.args)})
    except (SyntaxError, ValueError, KeyError, IndexError) as exc:
        raise BenchmarkError(
            f"cannot read gold call {call!r}: {exc}", file=task_id, field=f"ground_truth[{turn}]"
        ) from None
    return GoldCall(name, arguments, turn)


def _entries(category: str) -> tuple[list[dict[str, Any]], dict[str, list[list[str]]]]:
    root = data_root()
    name = f"BFCL_v4_multi_turn_{category}.json"
    entries = [
        json.loads(line) for line in (root / name).read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    answers = {
        row["id"]: row["ground_truth"]
        for row in (
            json.loads(line)
            for line in (root / "possible_answer" / name).read_text(encoding="utf-8").splitlines()
            if line.strip()
        )
    }
    return entries, answers


def to_task(entry: dict[str, Any], ground_truth: list[list[str]], category: str) -> Task:
    task_id = entry["id"].replace("_", "-")
    excluded = set(entry.get("excluded_function") or [])
    owners: dict[str, str] = {}
    tools: dict[str, TaskTool] = {}
    for cls in entry["involved_classes"]:
        if cls not in CLASS_MODULES:
            raise BenchmarkError(f"unsupported BFCL class {cls}", file=entry["id"], field="involved_classes")
        module = f"{BACKENDS}.{CLASS_MODULES[cls]}"
        for doc in function_docs(cls):
            owners[doc["name"]] = cls
            if doc["name"] in excluded:
                continue
            tools[doc["name"]] = TaskTool(
                doc["name"],
                doc["description"],
                json_schema(doc["parameters"]),
                python=f"{module}:{cls}.{doc['name']}",
            )
    long_context = category == "long_context"
    setups = tuple(
        ObjectSetup(
            f"{BACKENDS}.{CLASS_MODULES[cls]}:{cls}",
            "_load_scenario",
            {"scenario": entry["initial_config"].get(cls, {}), "long_context": long_context},
        )
        for cls in entry["involved_classes"]
        if cls not in STATELESS
    )
    turns = tuple(
        "\n".join(m["content"] for m in turn if m.get("role") == "user") for turn in entry["question"]
    )
    gold = tuple(
        parse_gold(c, owners, task_id=entry["id"], turn=k)
        for k, calls in enumerate(ground_truth)
        for c in calls
    )
    check = Check(
        type="python",
        python="bfcl_check:score_turn",
        per_turn=True,
        args={
            "id": entry["id"],
            "initial_config": entry["initial_config"],
            "involved_classes": entry["involved_classes"],
            "ground_truth": ground_truth,
            "long_context": long_context,
        },
    )
    return Task(
        id=task_id,
        instruction=turns[0],
        split="train",
        checks=(check,),
        gold=gold,
        tags=(f"bfcl-{category}", *sorted(c.lower() for c in entry["involved_classes"])),
        turns=turns if len(turns) > 1 else (),
        tools=tuple(tools.values()),
        tool_setup=setups,
        python_path=(str(RUNTIME),),
    )


def _select(spec: str) -> tuple[str, list[int] | None]:
    if not spec:
        return "base", list(range(DEFAULT_COUNT))
    category, _, picks = spec.partition(":")
    if category not in CATEGORIES:
        raise BenchmarkError(
            f"unknown BFCL category {category!r}",
            field="--benchmark",
            hint=f"bfcl, or bfcl:CATEGORY[:INDEXES] with CATEGORY one of {', '.join(CATEGORIES)} "
            "(miss_func is not supported)",
        )
    if not picks:
        return category, None
    indexes: list[int] = []
    try:
        for part in picks.split(","):
            low, dash, high = part.partition("-")
            indexes += list(range(int(low), int(high) + 1)) if dash else [int(low)]
    except ValueError:
        raise BenchmarkError(
            f"bad task indexes {picks!r}", field="--benchmark", hint="e.g. bfcl:base:0-9 or bfcl:base:1,5,7"
        ) from None
    return category, indexes


class BFCLAdapter:
    """``bfcl[:CATEGORY[:INDEXES]]`` (see the module docstring)."""

    name = "bfcl"

    def detect(self, spec: str) -> bool:
        return False  # only reached by name

    def load(self, spec: str) -> AdaptedBenchmark:
        category, indexes = _select(spec)
        entries, answers = _entries(category)
        if indexes is not None:
            bad = [i for i in indexes if not 0 <= i < len(entries)]
            if bad:
                raise BenchmarkError(
                    f"no task {bad[0]} in {category} (0-{len(entries) - 1})", field="--benchmark"
                )
            entries = [entries[i] for i in indexes]
        tasks = [to_task(e, answers[e["id"]], category) for e in entries]
        splits = assign_splits([t.id for t in tasks])
        name = "bfcl" if not spec else f"bfcl-{spec.replace(':', '-').replace(',', '-')}"
        from dataclasses import replace

        return AdaptedBenchmark(
            name=name,
            root=data_root(),
            tasks=tuple(replace(t, split=splits[t.id]) for t in tasks),
            description=f"BFCL v4 multi-turn ({category}) from bfcl-eval",
            references=paths.builtin_dir("trajectories") / "bfcl",
            source=f"bfcl:{spec}" if spec else "bfcl",
            shared_references=True,  # task ids name their category: one folder serves every subset
        )
