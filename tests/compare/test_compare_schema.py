"""The published JSON Schemas of a compare plan and a cell's result file describe what the command
reads and writes: the result files a comparison writes validate, and so do the shipped plans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from compare_plans import every_arm

from harnessevolve.core.paths import builtin_dir
from harnessevolve.core.schema import load_schema

PLANS = sorted((builtin_dir("benchmarks") / "perf" / "plans").glob("*.yaml"))


def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = load_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_every_result_file_of_a_comparison_validates(full: tuple[Path, Path, Any]) -> None:
    _plan, out, _result = full
    check = validator("compare_result")
    files = sorted(out.glob("cells/*/*/result.json"))
    assert len(files) == 8
    for path in files:
        errors = [e.message for e in check.iter_errors(yaml.safe_load(path.read_text()))]
        assert not errors, (path, errors)


@pytest.mark.parametrize("path", PLANS, ids=[p.name for p in PLANS])
def test_the_shipped_plans_validate(path: Path) -> None:
    assert not list(validator("compare_plan").iter_errors(yaml.safe_load(path.read_text())))


def test_the_plan_schema_takes_every_arm_kind_and_refuses_what_the_checker_refuses(
    bench: Path, hand: Path
) -> None:
    check = validator("compare_plan")
    doc = {"version": 1, **every_arm(bench, hand)}
    doc["arms"].append({"kind": "gepa", "matched_to": "evolve", "reflection_model": "scripted/x"})
    assert not list(check.iter_errors(doc))
    for bad_arm in (
        {"kind": "best-of-k", "k": 0},
        {"kind": "best-of-k", "k": 2, "matched_to": "evolve"},
        {"kind": "gepa", "budget": 5},
        {"kind": "seed", "options": {}},
        {"kind": "sampling"},
    ):
        assert list(check.iter_errors({**doc, "arms": [bad_arm]})), bad_arm
