"""Closed value lists stated in a parameter's description (``execute/stated_options.py``), used by
``loop.repair_calls`` as the enum they mean: the parser on every parameter of BFCL's multi-turn
tools and on prose that is no list; then through the agent loop on two benchmarks of other shapes
(a BFCL multi-turn task, whose tools accept a value off their list silently; tool-use-example's
cart with its product stated as a list)."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from scored_run import scored_run
from test_tool_use import call, rollout

from harnessevolve.core import paths
from harnessevolve.core.stated_options import stated_options, with_stated_options
from harnessevolve.execute.call_repair import match_option, repair_call


@pytest.mark.parametrize(
    ("description", "options"),
    [
        ('The mode to set. [Enum]: ["engage", "release"]', ["engage", "release"]),
        ("The base currency. [Enum]: USD, RMB, EUR", ["USD", "RMB", "EUR"]),
        ("Here are the options: read_write, read, write", ["read_write", "read", "write"]),
        ("The class of the travel. Options are: economy, business, first.", ["economy", "business", "first"]),
        ("Type of the order (Buy/Sell).", ["Buy", "Sell"]),
        (
            "The unit; one of: metric, imperial or kelvin. Defaults to metric.",
            ["metric", "imperial", "kelvin"],
        ),
        ("Allowed values are `asc` | `desc`", ["asc", "desc"]),
    ],
)
def test_a_stated_list_is_read(description: str, options: list[str]) -> None:
    assert stated_options(description) == options


@pytest.mark.parametrize(
    "description",
    [
        "Username of the user.",
        "The path of the file (relative to the current directory).",
        "The options to pass to the command, as one string.",
        "One of the files in the folder that the user named before, exactly as listed by ls.",
        "The city (name/code) or its zip code (input/output): two slashed pairs, no one list.",
        "",
    ],
)
def test_prose_is_no_list(description: str) -> None:
    assert stated_options(description) is None


def test_every_stated_list_of_bfcls_multi_turn_tools_is_found_and_nothing_else() -> None:
    pytest.importorskip("bfcl_eval")
    from harnessevolve.adapters import load_benchmark_spec

    found = {}
    for task in load_benchmark_spec("bfcl:base").tasks:
        for tool in task.tools:
            for key, prop in (tool.parameters.get("properties") or {}).items():
                options = stated_options(str(prop.get("description") or ""))
                if options:
                    found[(tool.name, key)] = options
    assert found[("place_order", "order_type")] == ["Buy", "Sell"]
    assert found[("get_flight_cost", "travel_class")] == ["economy", "business", "first"]
    assert found[("startEngine", "ignitionMode")] == ["START", "STOP"]
    assert "New York" in found[("get_nearest_airport_by_city", "location")]
    assert len(found) == 13  # read from the descriptions: each states "[Enum]", "options" or "(a/b)"


def test_a_stated_list_becomes_the_enum_a_value_is_matched_to() -> None:
    schema = {
        "type": "object",
        "properties": {
            "order_type": {"type": "string", "description": "Type of the order (Buy/Sell)."},
            "doors": {
                "type": "array",
                "items": {"type": "string"},
                "description": "[Enum]: ['driver', 'rear_left']",
            },
            "mode": {"type": "string", "enum": ["a", "b"], "description": "Options are: x, y."},
        },
    }
    enriched = with_stated_options(schema)
    assert enriched["properties"]["order_type"]["enum"] == ["Buy", "Sell"]
    assert enriched["properties"]["mode"]["enum"] == ["a", "b"]  # the schema's own enum wins
    assert "enum" not in schema["properties"]["order_type"]  # the given schema is left as it was
    fixed = repair_call("order", {"order_type": "BUY", "doors": ["Rear-Left"]}, "", {"order": schema})
    assert fixed.error is None and fixed.arguments == {"order_type": "Buy", "doors": ["rear_left"]}
    assert "order_type: 'BUY' -> 'Buy' (an option its description states)" in fixed.notes
    refused = repair_call("order", {"order_type": "purchase"}, "", {"order": schema})
    assert (
        refused.error is not None
        and "order_type must be one of ['Buy', 'Sell'], not 'purchase'" in refused.error
    )


def test_a_value_is_matched_only_to_its_one_option() -> None:
    assert match_option("First Class", ["economy", "business", "first"]) == "first"
    assert match_option("New York City", ["London", "New York", "York"]) is None  # two hold its words
    assert match_option("New York City", ["London", "New York"]) == "New York"
    assert match_option("engaged", ["engage", "release"]) == "engage"
    assert match_option("front", ["on", "off", "auto"]) is None  # a word, not letters inside one
    assert match_option("automatic", ["START", "STOP"]) is None


def test_a_bfcl_call_with_a_value_off_its_stated_list_runs_with_the_listed_one(scripts) -> None:
    """BFCL's trading tool takes ``order_type='BUY'`` without complaint and records the order as
    another type: the task fails though every call "worked". With repair_calls the value is read
    as the one option its description states, and the task's gold calls pass."""
    pytest.importorskip("bfcl_eval")
    from harnessevolve.adapters import load_benchmark_spec
    from harnessevolve.execute.tool_server import benchmark_sandbox
    from harnessevolve.harness.load import load_harness
    from harnessevolve.scoring.references import gold_replies

    bench = load_benchmark_spec("bfcl:base:102")
    task = bench.tasks[0]
    replies = gold_replies(task)
    for reply in replies:
        for c in reply.get("tool_calls", []):
            if c["name"] == "place_order":
                c["arguments"] = {**c["arguments"], "order_type": "BUY"}
    sandbox = benchmark_sandbox(None, bench)

    def score(repair: bool) -> tuple[float, list[str]]:
        harness = load_harness(paths.builtin_dir("harnesses") / "tool-agent")
        harness = replace(harness, loop=replace(harness.loop, repair_calls=repair, max_steps=50))
        model = scripts(f"bfcl-upper-{repair}", list(replies))
        score, run = scored_run(harness, task, model, sandbox)
        return score, [n for r in run.extra.get("call_repairs", []) for n in r["notes"]]

    plain, notes = score(False)
    assert plain < 1.0 and notes == []
    repaired, notes = score(True)
    assert repaired == 1.0 and "order_type: 'BUY' -> 'Buy' (an option its description states)" in notes


def stated_cart(tmp_path: Path) -> Path:
    """tool-use-example with addItem's product stated as a list in its parameter's description."""
    bench = tmp_path / "tool-use-example"
    shutil.copytree(paths.builtin_dir("benchmarks") / "tool-use-example", bench)
    task_file = bench / "tasks" / "cart-total.yaml"
    doc = yaml.safe_load(task_file.read_text())
    add = next(t for t in doc["tools"] if t["name"] == "addItem")
    add["parameters"]["properties"]["name"] = {
        "type": "string",
        "description": "The product. Options are: apple, pear, milk, bread.",
    }
    task_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    return bench


def cart_policy(messages: list[dict], tools: list[dict]) -> dict:
    """Products as a model writes them: capitalised, plural, then one the shop does not sell."""
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if turn == 0:
        return call("addItem", name="cheese", quantity=1)
    if turn == 1:
        return call("addItem", name="Milk", quantity=1)
    if turn == 2:
        return call("addItem", name="breads", quantity=2)
    if turn == 3:
        return call("listCart")
    total = [m["content"] for m in messages if m["role"] == "tool"][-1]
    return call(
        "submit", answer=total.split('"total": ')[-1].split("}")[0].strip() if '"total"' in total else "?"
    )


def test_a_cart_product_off_its_stated_list_is_matched_or_answered_with_the_list(
    scripts, tmp_path: Path
) -> None:
    bench = stated_cart(tmp_path)
    trajectory, result = rollout(
        bench, "cart-total", scripts("cart-stated", cart_policy), loop={"repair_calls": True}
    )
    first = trajectory.agent_steps[0].observations[0].content
    assert first.startswith(
        "error: addItem was not run: name must be one of ['apple', 'pear', 'milk', 'bread']"
    )
    ran = [c.arguments for s in trajectory.agent_steps[1:3] for c in s.tool_calls]
    assert ran == [{"name": "milk", "quantity": 1}, {"name": "bread", "quantity": 2}]
    assert result.passed
    plain, result = rollout(bench, "cart-total", scripts("cart-stated-plain", cart_policy))
    assert not result.passed  # without the repair the cart holds "Milk" and "breads": no price


def test_a_python_tools_signature_error_names_the_parameters_it_takes(scripts) -> None:
    """Without repair_calls a task's Python tool called with a name it lacks raises a TypeError
    that names only the refused argument (read from BFCL 1.5B runs: 27 such results in one run);
    the result now says the parameters it takes. On tool-use-example's cart and a BFCL tool."""
    bench = paths.builtin_dir("benchmarks") / "tool-use-example"
    replies = [call("addItem", name="milk", amount=1), call("submit", answer="x")]
    model = scripts("cart-misnamed", lambda m, t: replies[sum(x["role"] == "assistant" for x in m)])
    trajectory, _ = rollout(bench, "cart-total", model)
    seen = trajectory.agent_steps[0].observations[0].content
    assert "unexpected keyword argument 'amount'" in seen
    assert seen.endswith("Its parameters: name (string, required), quantity (integer).")
    pytest.importorskip("bfcl_eval")
    from harnessevolve.adapters import load_benchmark_spec
    from harnessevolve.execute.tool_server import ToolServer

    task = load_benchmark_spec("bfcl:base:102").tasks[0]
    sandbox = benchmark_sandbox_of("bfcl:base:102")

    async def go() -> str:
        from harnessevolve.execute.workspace import create_workspace, remove_workspace

        workspace = await create_workspace(task, sandbox=sandbox)
        try:
            async with ToolServer.start(task, workspace, sandbox=sandbox, timeout_s=30, limit=4000) as server:
                result = await server.call("place_order", {"order_id": 1, "symbol": "TSLA"})
                return result.output
        finally:
            remove_workspace(workspace)

    text = asyncio.run(go())
    assert "unexpected keyword argument 'order_id'" in text
    assert "Its parameters: order_type (string, required), symbol (string, required)" in text


def benchmark_sandbox_of(spec: str):
    from harnessevolve.adapters import load_benchmark_spec
    from harnessevolve.execute.tool_server import benchmark_sandbox

    return benchmark_sandbox(None, load_benchmark_spec(spec))
