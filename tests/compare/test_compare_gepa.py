"""The gepa arm: GEPA's reflective search on the seed harness's texts, its metric calls matched to
the evolve cell's rollouts, its best candidate scored like every arm. The scripted learner plays
the agent; a scripted reflector proposes a demonstration of the family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from compare_plans import EVOLVE, FAMILY, LEARNER, compare, read_result, rows, table_of, write_plan

from harnessevolve.compare.gepa_cell import harness_components, split_front_matter, write_components
from harnessevolve.core.paths import builtin_dir
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.harness.load import load_harness

pytest.importorskip("gepa")


def demonstration(bench: Path) -> str:
    task = load_benchmark(str(bench)).task(f"{FAMILY}-01")
    gold = "\n".join(json.dumps({"tool": g.tool, "arguments": g.arguments}) for g in task.gold)
    return f"## Example\nTask: {task.instruction}\n{gold}\n"


def test_a_gepa_cell_spends_what_the_evolve_cell_spent_and_is_scored_on_test(
    tmp_path: Path, bench: Path, session_env: None, scripts
) -> None:
    shown = demonstration(bench)
    reflector = scripts("gepa-reflector", lambda _m, _t: f"The new text:\n```\n{shown}```")
    plan = write_plan(
        tmp_path,
        model=LEARNER,
        benchmark=str(bench),
        seeds=[0],
        arms=[
            {"kind": "seed"},
            {"name": "evolve", "kind": "evolve", "options": EVOLVE},
            {"kind": "gepa", "matched_to": "evolve", "reflection_model": reflector},
        ],
    )
    out = tmp_path / "out"
    doc = table_of(compare(plan, "--out", out, "--json"))
    assert doc["comparison"]["ran"] == ["seed/seed-0", "evolve/seed-0", "gepa/seed-0"]
    evolve, gepa = read_result(out, "evolve", 0), read_result(out, "gepa", 0)
    assert gepa["arm"]["kind"] == "gepa"
    details = gepa["details"]
    assert details["budget"] == evolve["rollouts"] == details["matched_rollouts"]
    # GEPA counts a metric call per (candidate, task); what it really ran is at most that, plus
    # the one validation pass it may overshoot by
    assert 0 < gepa["rollouts"] <= details["budget"] + 2
    assert details["reflection_calls"] >= 1 and gepa["tokens"] > 0
    # the demonstration it found reaches the test tasks of the family
    assert details["changed_components"] and rows(doc)["gepa"]["per_seed"] == {"0": 100.0}
    assert list(rows(doc)) == ["seed", "evolve", "gepa"]


def test_a_gepa_arm_names_its_missing_fields(tmp_path: Path, bench: Path) -> None:
    arms = [{"kind": "seed"}, {"kind": "gepa", "budget": 10}]
    plan = write_plan(tmp_path, model=LEARNER, benchmark=str(bench), seeds=[0], arms=arms)
    refused = compare(plan, "--out", tmp_path / "out")
    assert refused.exit_code == 2
    assert "arms[1].reflection_model" in refused.output and "needs the model" in refused.output
    arms[1] = {"kind": "gepa", "reflection_model": LEARNER}
    plan = write_plan(tmp_path, model=LEARNER, benchmark=str(bench), seeds=[0], arms=arms)
    refused = compare(plan, "--out", tmp_path / "out")
    assert refused.exit_code == 2 and "arms[1].matched_to" in refused.output
    assert not (tmp_path / "out").exists()


def test_components_are_the_editable_texts_and_round_trip(tmp_path: Path) -> None:
    import shutil

    seed = tmp_path / "seed"
    shutil.copytree(builtin_dir("harnesses") / "shell-agent", seed)
    skill = seed / "skills" / "listing" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: listing\ndescription: List files.\n---\nRun ls first.\n")
    components = harness_components(seed)
    assert set(components) == {"prompts/system.md", "prompts/examples.md", "skills/listing/SKILL.md"}
    assert components["skills/listing/SKILL.md"] == "Run ls first.\n"
    edited = {**components, "skills/listing/SKILL.md": "Run ls -la.\n", "../escape.md": "x"}
    harness = load_harness(write_components(seed, tmp_path / "cand", edited))
    assert harness.skills[0].body.strip() == "Run ls -la." and harness.skills[0].description
    assert not (tmp_path / "escape.md").exists()  # a name GEPA made up is not written
    assert split_front_matter("no front matter") == ("", "no front matter")
