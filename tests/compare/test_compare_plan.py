"""Bad plans: each is one line naming the plan file and the field, a hint, exit 2, and no cell started
(the output folder is never made)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from compare_plans import EVOLVE, LEARNER, compare, write_plan

Edit = Callable[[dict[str, Any], Path], None]


def _set(**fields: Any) -> Edit:
    def edit(doc: dict[str, Any], _root: Path) -> None:
        doc.update(fields)

    return edit


def _drop(name: str) -> Edit:
    def edit(doc: dict[str, Any], _root: Path) -> None:
        del doc[name]

    return edit


def _arm(index: int, **fields: Any) -> Edit:
    def edit(doc: dict[str, Any], _root: Path) -> None:
        doc["arms"][index] = {k: v for k, v in {**doc["arms"][index], **fields}.items() if v is not None}

    return edit


def _add_arm(arm: dict[str, Any]) -> Edit:
    def edit(doc: dict[str, Any], _root: Path) -> None:
        doc["arms"].append(arm)

    return edit


def _no_test_split(doc: dict[str, Any], root: Path) -> None:
    folder = root / "no-test" / "shell-basics"
    shutil.copytree(doc["benchmark"], folder)
    for task in folder.glob("tasks/*.yaml"):
        if "split: test" in task.read_text():
            task.unlink()
    doc["benchmark"] = str(folder)


CASES: dict[str, tuple[Edit, str, str]] = {
    "no version": (_drop("version"), "version", "missing"),
    "newer version": (_set(version=2), "version", "newer than this harnessevolve reads"),
    "unknown field": (_set(budget=3), "budget", "unknown field"),
    "no model": (_drop("model"), "model", "missing"),
    "unknown model provider": (_set(model="scripted/nowhere:none"), "model", ""),
    "unknown benchmark": (_set(benchmark="no-such-benchmark"), "benchmark", "unknown benchmark"),
    "benchmark without a test split": (_no_test_split, "benchmark", "has no test split"),
    "seeds not a list": (_set(seeds=3), "seeds", "non-empty list"),
    "a seed twice": (_set(seeds=[1, 1]), "seeds", "listed twice"),
    "a negative seed": (_set(seeds=[0, -1]), "seeds[1]", "whole number"),
    "unknown template": (_set(harness={"template": "nope"}), "harness.template", "unknown template"),
    "no harness folder": (_set(harness="missing-folder"), "harness", "no harness.yaml"),
    "no arms": (_set(arms=[]), "arms", "non-empty list"),
    "unknown arm kind": (_arm(0, kind="sampling"), "arms[0].kind", "unknown arm kind 'sampling'"),
    "gepa arm without a reflection model": (
        _add_arm({"kind": "gepa", "budget": 5}),
        "arms[3].reflection_model",
        "needs the model",
    ),
    "gepa budget of 0": (
        _add_arm({"kind": "gepa", "budget": 0, "reflection_model": "scripted/policy:learner"}),
        "arms[3].budget",
        "from 1 to",
    ),
    "k of 0": (_arm(2, matched_to=None, k=0), "arms[2].k", "from 1 to"),
    "k and matched_to": (_arm(2, k=3), "arms[2].matched_to", "one of them"),
    "matched to no evolve arm": (_arm(2, matched_to="seed"), "arms[2].matched_to", "names no evolve arm"),
    "temperature out of range": (_arm(2, temperature=9), "arms[2].temperature", "temperature"),
    "unknown arm field": (
        _arm(0, options={"generations": 2}),
        "arms[0].options",
        "unknown field of a seed arm",
    ),
    "unknown run option": (
        _arm(1, options={"generation": 2}),
        "arms[1].options.generation",
        "unknown option",
    ),
    "run option out of range": (
        _arm(1, options={"generations": 0}),
        "arms[1].options.generations",
        "out of range",
    ),
    "run option of the wrong type": (
        _arm(1, options={"batch_size": "two"}),
        "arms[1].options.batch_size",
        "whole number",
    ),
    "option the plan sets": (
        _arm(1, options={"model": "x/y"}),
        "arms[1].options.model",
        "not an option of an arm",
    ),
    "unknown proposer": (
        _arm(1, options={"proposers": ["psychic"]}),
        "arms[1].options.proposers",
        "unknown proposer",
    ),
    "unknown gates file": (_arm(1, options={"gates": "no-such-gates"}), "arms[1].options.gates", ""),
    "two arms of one name": (_add_arm({"kind": "seed"}), "arms[3].name", "two arms are named 'seed'"),
    "an arm name that is no folder name": (_arm(0, name="../up"), "arms[0].name", "not an arm name"),
    "a harness arm without a folder": (
        _add_arm({"name": "h", "kind": "harness"}),
        "arms[3].path",
        "harness folder",
    ),
    "an evolve arm starting from no harness": (
        _add_arm({"name": "e2", "kind": "evolve", "options": {"generations": 1}, "start": "nowhere"}),
        "arms[3].start",
        "no harness.yaml",
    ),
    "an unknown sandbox": (_set(execution={"sandbox": "jail"}), "execution.sandbox", "not one of"),
    "no sandbox without saying so": (_set(execution={"sandbox": "none"}), "execution.sandbox", "unisolated"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_plan_is_one_line_naming_the_file_and_field(case: str, bench: Path, tmp_path: Path) -> None:
    edit, field, message = CASES[case]
    doc: dict[str, Any] = {
        "version": 1,
        "model": LEARNER,
        "benchmark": str(bench),
        "seeds": [0],
        "arms": [{"kind": "seed"}, {"name": "evolve", "kind": "evolve", "options": dict(EVOLVE)},
                 {"kind": "best-of-k", "matched_to": "evolve"}],
    }  # fmt: skip
    edit(doc, tmp_path)
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "out"
    result = compare(plan, "--out", out)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("Hint: "), result.output
    assert lines[0].startswith(f"Error: {plan}: {field}: "), lines[0]
    assert message in lines[0]
    assert not out.exists()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("version: 1\nmodel: [unclosed\n", "line"),
        ("- just\n- a list\n", "a plan is a YAML mapping"),
        ("version: 1\nversion: 1\n", "line 2"),
    ],
)
def test_a_plan_that_is_no_yaml_mapping_is_refused(text: str, where: str, tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(text)
    result = compare(plan, "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"Error: {plan}: ") and where in result.output.splitlines()[0]
    assert not (tmp_path / "out").exists()


def test_a_missing_plan_file_and_a_good_plan_with_every_optional_field(
    bench: Path, hand: Path, tmp_path: Path
) -> None:
    missing = compare(tmp_path / "nowhere.yaml")
    assert missing.exit_code == 2 and "file not found" in missing.output
    plan = write_plan(
        tmp_path,
        model=LEARNER,
        benchmark=str(bench),
        harness=str(hand),
        seeds=[0],
        execution={"unsafe_no_sandbox": True, "concurrency": 2},
        arms=[
            {"name": "as-is", "kind": "seed"},
            {"name": "bok", "kind": "best-of-k", "k": 2, "temperature": 0.5},
        ],
    )
    result = compare(plan, "--out", tmp_path / "out", "--json")
    assert result.exit_code == 0, result.output
    cell = tmp_path / "out" / "cells" / "bok" / "seed-0" / "result.json"
    doc = json.loads(cell.read_text())
    assert doc["scorer"]["sandbox"] == "none" and doc["details"]["k"] == 2 and doc["rollouts"] == 4
    assert doc["details"]["matched_to"] is None and doc["details"]["temperature"] == 0.5
