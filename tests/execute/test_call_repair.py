"""``loop.repair_calls``: a call checked against its tool's schema before it runs (near-miss names,
wrong value types, a missing required argument answered instead of run), on two benchmarks of other
shapes (shell-basics' bash tool; tool-use-example's function-calling cart), and the repair rules."""

from __future__ import annotations

import re

import pytest
from test_tool_use import call, rollout

from harnessevolve.core import paths
from harnessevolve.execute.call_repair import coerce, match_name, repair_call

BASH = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
ADD = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "quantity": {"type": "integer"}},
    "required": ["name"],
}
SCHEMAS = {"bash": BASH, "addItem": ADD, "math.add": {"type": "object", "properties": {}}}


def test_near_miss_names_and_values_are_repaired_where_one_reading_fits() -> None:
    fixed = repair_call("AddItem", {"Name": "milk", "quantity": "2"}, "", SCHEMAS)
    assert (fixed.name, fixed.arguments, fixed.error) == ("addItem", {"name": "milk", "quantity": 2}, None)
    assert fixed.notes == [
        "tool 'AddItem' -> 'addItem'",
        "argument 'Name' -> 'name'",
        "quantity: '2' -> integer",
    ]
    assert repair_call("math_add", {}, "", SCHEMAS).name == "math.add"
    renamed = repair_call("bash", {"cmd": "ls"}, "", SCHEMAS)
    assert renamed.arguments == {"command": "ls"} and "the one required argument missing" in renamed.notes[0]
    raw = repair_call("bash", None, "ls -la", SCHEMAS)
    assert raw.arguments == {"command": "ls -la"} and raw.notes == ["raw text -> 'command'"]


def test_a_call_missing_a_required_argument_is_answered_not_run() -> None:
    missing = repair_call("addItem", {"quantity": 2}, "", SCHEMAS)
    assert missing.error is not None and "needs 'name'" in missing.error
    assert "name (string, required), quantity (integer)" in missing.error


def test_what_has_no_single_reading_is_left_as_it_is() -> None:
    untouched = repair_call("bash", {"command": "ls"}, "", SCHEMAS)
    assert untouched.notes == [] and untouched.error is None
    assert repair_call("nosuchtool", {"x": 1}, "", SCHEMAS).name == "nosuchtool"
    assert match_name("add", ["addItem", "add_item"]) is None  # two close spellings: no guess
    assert coerce("two", {"type": "integer"}) == ("two", None)
    assert coerce("2.5", {"type": "integer"}) == ("2.5", None)
    assert coerce("[1, 2]", {"type": "array"}) == ([1, 2], "JSON text -> array")
    assert coerce("a", {"type": "array", "items": {"type": "string"}}) == (["a"], "one value -> array")
    assert coerce("MILK", {"type": "string", "enum": ["milk", "bread"]}) == (
        "milk",
        "'MILK' -> 'milk' (enum)",
    )
    assert coerce("True", {"type": "boolean"}) == (True, "'True' -> boolean")


CAR = {
    "type": "object",
    "properties": {
        "doors": {"type": "array", "items": {"type": "string", "enum": ["driver", "passenger"]}},
        "mode": {"type": "string", "enum": ["START", "STOP"]},
        "pressure": {"type": "number"},
    },
    "required": ["mode"],
}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (
            {"mode": "START", "doors": ["front"]},
            "each of doors must be one of ['driver', 'passenger'], not ['front']",
        ),
        ({"mode": "IDLE"}, "mode must be one of ['START', 'STOP'], not 'IDLE'"),
        ({"mode": "START", "pressure": "full"}, "pressure must be number, not 'full'"),
        ({"mode": "START", "since": "2024-01-01"}, "it has no argument 'since'"),
    ],
)
def test_a_value_no_repair_fits_is_answered_with_what_the_schema_allows(
    arguments: dict, problem: str
) -> None:
    """Read from BFCL 1.5B trajectories: doors named outside their enum, a word for a number, an
    argument the function does not take (a TypeError from the tool otherwise): not run, answered
    with the problem and the allowed values."""
    answered = repair_call("car", arguments, "", {"car": CAR})
    assert answered.error is not None and problem in answered.error
    assert answered.error.startswith("error: car was not run:")
    assert (
        "doors (array, one of ['driver', 'passenger']), mode (string, one of ['START', 'STOP'], required)"
        in (answered.error)
    )


def test_what_the_schema_does_not_rule_on_still_runs() -> None:
    assert repair_call("car", {"mode": "start", "pressure": "32"}, "", {"car": CAR}).error is None  # repaired
    open_schema = {**CAR, "additionalProperties": True}
    assert repair_call("car", {"mode": "STOP", "extra": 1}, "", {"car": open_schema}).error is None
    assert (
        repair_call("any", {"whatever": [1]}, "", {"any": {"type": "object"}}).error is None
    )  # no properties
    assert repair_call("math.add", {}, "", SCHEMAS).error is None


def cart_policy(messages: list[dict], tools: list[dict]) -> dict:
    """Names and types a small model gets wrong: a capitalised tool and argument, a quoted number."""
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if turn == 0:
        return call("AddItem", Name="milk", quantity="1")
    if turn == 1:
        return call("addItem", name="bread", quantity="2")
    if turn == 2:
        return call("listCart")
    total = re.findall(r'"total": ([0-9.]+)', messages[-1]["content"])
    return call("submit", answer=total[0] if total else "?")


@pytest.mark.parametrize("repair", [False, True])
def test_a_function_calling_task_passes_only_with_its_calls_repaired(scripts, repair: bool) -> None:
    bench = paths.builtin_dir("benchmarks") / "tool-use-example"
    trajectory, result = rollout(
        bench, "cart-total", scripts("cart-typos", cart_policy), loop={"repair_calls": repair}
    )
    assert result.passed is repair
    if repair:
        notes = [n for r in trajectory.extra["call_repairs"] for n in r["notes"]]
        assert "tool 'AddItem' -> 'addItem'" in notes and "quantity: '2' -> integer" in notes
        assert trajectory.agent_steps[0].tool_calls[0].function_name == "addItem"  # what ran
    else:
        assert "call_repairs" not in trajectory.extra


def shell_policy(messages: list[dict], tools: list[dict]) -> dict:
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if turn == 0:
        return call("Bash")  # no command at all: answered with what the tool needs
    if turn == 1:
        return call("Bash", cmd="wc -l < list.txt")
    return call("submit", answer=messages[-1]["content"].strip().split()[0])


def test_a_shell_task_gets_the_missing_argument_named_then_its_misnamed_one_repaired(scripts) -> None:
    bench = paths.builtin_dir("benchmarks") / "shell-basics"
    trajectory, result = rollout(
        bench, "count-lines-01", scripts("shell-typos", shell_policy), loop={"repair_calls": True}
    )
    first = trajectory.agent_steps[0].observations[0].content
    assert (
        first.startswith("error: bash was not run: it needs 'command'")
        and "command (string, required)" in first
    )
    assert trajectory.agent_steps[1].tool_calls[0].arguments == {"command": "wc -l < list.txt"}
    assert result.passed
