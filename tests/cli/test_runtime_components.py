"""docs/runtime.md, end to end through the CLI: `init --template tool-agent`, turn on memory and
recovery, `validate` accepts it, a scripted run uses both (memory entries in the prompt of the
trajectory, a recovery rule firing on a repeated call); malformed components are refused by
`validate` naming file and field."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from harnessevolve.cli.app import app
from tests.run_args import run_args

TURN_ON = """
memory:
  top_k: 2
recovery:
  rules:
    - event: repeated_call
      times: 2
      action: note
      note: You made the same call twice in a row. Use what it returned, or submit your answer.
"""
ENTRY = """version: 1
task: Put items in a shopping cart and submit the cart total
lesson: Add each item with addItem, read the total with listCart, then submit that total.
outcome: success
"""


def tool_agent(tmp_path: Path, cli, settings: str = TURN_ON, entries: dict[str, str] | None = None) -> Path:
    target = tmp_path / "h"
    assert cli.invoke(app, ["init", str(target), "--template", "tool-agent"]).exit_code == 0
    with (target / "harness.yaml").open("a") as out:
        out.write(settings)
    (target / "memory").mkdir()
    for name, text in (entries if entries is not None else {"cart.yaml": ENTRY}).items():
        (target / "memory" / name).write_text(text)
    return target


def test_memory_and_recovery_turned_on_are_used_by_a_scripted_run(tmp_path: Path, cli) -> None:
    target = tool_agent(tmp_path, cli)
    result = cli.invoke(app, ["validate", str(target)])
    assert result.exit_code == 0, result.output
    repo = git.Repo(target)
    repo.git.add(A=True)
    repo.index.commit("turn on memory and recovery")
    args = run_args(
        target, "scripted/policy:repeater", benchmark="tool-use-example", generations=1, batch_size=2
    )
    result = cli.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    trajectories = [
        json.loads(p.read_text()) for p in target.glob(".harnessevolve/runs/*/trajectories/*/*.json")
    ]
    assert trajectories
    cart = [t for t in trajectories if t["extra"]["memory"]["retrieved"] == ["memory/cart.yaml"]]
    assert cart, [t["extra"]["memory"] for t in trajectories]
    assert all("read the total with listCart" in t["steps"][0]["message"] for t in cart)
    fired = [t for t in trajectories if t["extra"].get("recovery")]
    assert fired and all(f["event"] == "repeated_call" for t in fired for f in t["extra"]["recovery"])
    notes = [s for t in fired for s in t["steps"] if (s.get("extra") or {}).get("component") == "recovery"]
    assert notes and notes[0]["source"] == "user" and "same call twice" in notes[0]["message"]
    report = cli.invoke(app, ["report", "-H", str(target), "--json"])
    assert report.exit_code == 0, report.output
    rows = json.loads(report.output)["components"]
    assert rows and sum(r["memory_used"] for r in rows) == len(cart)
    assert sum(r["recovery_fired"] for r in rows) == sum(len(t["extra"]["recovery"]) for t in fired)
    assert all(r["forecast_accuracy"] is None and r["component_errors"] == 0 for r in rows)


@pytest.mark.parametrize(
    ("settings", "entries", "extra_files", "named"),
    [
        (TURN_ON, {"bad.yaml": "version: 1\ntask: x\noutcome: success\n"}, {}, "memory/bad.yaml"),
        (TURN_ON, {"bad.yaml": ENTRY.replace("success", "maybe")}, {}, "outcome"),
        ("memory: {max_entries: 2}\n", {f"e{i}.yaml": ENTRY for i in range(3)}, {}, "memory.max_entries"),
        (
            "recovery:\n  rules:\n    - {event: sunrise, action: note, note: hi}\n",
            {},
            {},
            "recovery.rules[0].event",
        ),
        ("recovery:\n  rules:\n    - {event: tool_error, action: note}\n", {}, {}, "recovery.rules[0]"),
        ("world_model: {max_chars: 100}\n", {}, {"world_model.md": "x" * 101}, "world_model.md"),
        ("world_model: {}\n", {}, {}, "world_model.file"),
    ],
)
def test_validate_names_file_and_field_of_a_malformed_component(
    tmp_path: Path, cli, settings: str, entries: dict[str, str], extra_files: dict[str, str], named: str
) -> None:
    target = tool_agent(tmp_path, cli, settings, entries)
    for name, text in extra_files.items():
        (target / name).write_text(text)
    result = cli.invoke(app, ["validate", str(target)])
    assert result.exit_code == 2, result.output
    assert named in result.output and "Hint:" in result.output
