"""Build small benchmark folders with Python tools, MCP servers and Python checks for the tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from harnessevolve.core import paths

EXAMPLE = paths.builtin_dir("benchmarks") / "tool-use-example"

TOOLS_PY = """
import time


class Counter:
    def __init__(self, start=0):
        self.value = start

    def add(self, n):
        self.value += n
        return {"value": self.value}

    def read(self):
        return self.value

    def hang(self):
        time.sleep(60)

    def opaque(self):
        return object()

    def huge(self):
        return "x" * 3_000_000

    def boom(self):
        raise ValueError("the counter broke")


class BrokenSetup:
    def __init__(self):
        raise RuntimeError("cannot connect to the backend")

    def ping(self):
        return "pong"


def shout(text):
    print("this goes to stderr, not into the protocol")
    return text.upper()
"""

CHECKS_PY = """
def value_is(check):
    value = check.state["objects"]["counter_tools:Counter"]["value"]
    want = check.args["after_turn"][check.turn] if check.turn is not None else check.args["value"]
    return {"score": 1.0 if value == want else 0.0, "reason": f"value {value}, expected {want}"}


def raises(check):
    raise RuntimeError("the check itself is broken")


def too_high(check):
    return 1.5


def not_a_score(check):
    return "yes"


def hangs(check):
    import time

    time.sleep(60)
"""

NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
NONE = {"type": "object", "properties": {}}


def counter_tools(*methods: str) -> list[dict]:
    tools = {
        "add": ("addToCounter", NUMBER),
        "read": ("readCounter", NONE),
        "hang": ("hang", NONE),
        "opaque": ("opaque", NONE),
        "huge": ("huge", NONE),
        "boom": ("boom", NONE),
    }
    return [
        {
            "name": tools[m][0],
            "description": f"counter {m}",
            "parameters": tools[m][1],
            "implementation": {"python": f"counter_tools:Counter.{m}"},
        }
        for m in methods
    ]


def write_bench(root: Path, tasks: dict[str, dict], *, meta: dict | None = None) -> Path:
    (root / "tasks").mkdir(parents=True, exist_ok=True)
    (root / "counter_tools.py").write_text(TOOLS_PY)
    (root / "counter_checks.py").write_text(CHECKS_PY)
    (root / "benchmark.yaml").write_text(yaml.safe_dump({"version": 1, "name": "tool-tests", **(meta or {})}))
    for task_id, doc in tasks.items():
        full = {"version": 1, "id": task_id, "split": "train", **doc}
        (root / "tasks" / f"{task_id}.yaml").write_text(yaml.safe_dump(full, sort_keys=False))
    return root


def copy_example(target: Path) -> Path:
    """The shipped example under another name (so the checkout's references of it do not apply)."""
    shutil.copytree(EXAMPLE, target)
    meta = target / "benchmark.yaml"
    meta.write_text(meta.read_text().replace("name: tool-use-example", "name: tool-use-copy"))
    return target
