"""A scripted run whose failures have every kind of reason the report shows: a task driven by a
simulated user (how the conversation ended) and scored by a judge check (the judge's reason), beside
tool-use-example's own tasks (failed checks, stop reasons), and one task that passes (a judge that
holds) so a failures-only view has something to hide. Models are scripted; nothing leaves the
process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from run_args import run_args
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.models.scripted import register_script, unregister_script

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "tool-use-example"
JUDGE_REASON = "the agent never told the shopper what the cart holds"
USER_END = "transfer"

CHAT_TASK = {
    "version": 1,
    "id": "cart-chat",
    "split": "train",
    "tags": ["multi-turn", "simulated-user"],
    "instruction": "Please add 2 apples to my cart.",
    "user": {
        "model": "scripted/report-shopper",
        "instructions": "You want 2 apples and a confirmation of your cart.",
        "stop": {"###TRANSFER###": USER_END, "###STOP###": "stop"},
        "max_turns": 4,
    },
    "tools": [
        {
            "name": "addItem",
            "description": "Add a quantity of a product (apple, pear, milk, bread) to the cart.",
            "parameters": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "quantity": {"type": "integer"}},
                "required": ["name"],
            },
            "implementation": {"python": "cart:Cart.add_item"},
        }
    ],
    "checker": [
        {
            "type": "judge",
            "assertion": "The agent confirmed what the cart holds.",
            "model": "scripted/report-judge",
        }
    ],
}


EASY_TASK = {
    "version": 1,
    "id": "say-hello",
    "split": "train",
    "instruction": "Say hello to the user.",
    "checker": [
        {"type": "judge", "assertion": "The agent replied at all.", "model": "scripted/report-judge"}
    ],
}


def shopper(messages: list[dict], tools: object) -> str:
    """Asks once more, then hands the conversation over (its ``transfer`` stop token)."""
    said = sum(m["role"] == "assistant" for m in messages)
    return "What is in my cart now?" if said < 2 else "I give up. ###TRANSFER###"


def judge(messages: list[dict], tools: object) -> dict:
    """Holds for ``say-hello``'s assertion, never for ``cart-chat``'s."""
    if "replied at all" in messages[-1]["content"]:
        return {"content": json.dumps({"holds": True, "reason": "it did"})}
    return {"content": json.dumps({"holds": False, "reason": JUDGE_REASON})}


def make_reasons_run(root: Path) -> Path:
    """A harness under ``root`` with one finished one-generation run; returns the harness folder.
    Set ``XDG_CACHE_HOME`` first (the judge's replies are cached there)."""
    bench = root / "bench"
    shutil.copytree(BENCHMARK, bench)
    for task in (CHAT_TASK, EASY_TASK):
        (bench / "tasks" / f"{task['id']}.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    cli = CliRunner()
    harness = root / "h"
    assert cli.invoke(app, ["init", str(harness), "--template", "tool-agent"]).exit_code == 0
    register_script("report-shopper", shopper)
    register_script("report-judge", judge)
    try:
        args = run_args(harness, "scripted/policy:gives_up", benchmark=bench, generations=1, batch_size=4)
        result = cli.invoke(app, args)
    finally:
        unregister_script("report-shopper")
        unregister_script("report-judge")
    assert result.exit_code in (0, 1), result.output
    return harness
