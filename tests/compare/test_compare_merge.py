"""``harnessevolve compare merge DIR...``: cells made in several folders (machines, days) joined into the
table one folder would give, and cells that do not measure the same thing refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from compare_plans import LEARNER, compare, every_arm, result_file, rows, table_of, write_plan


def _numbers(doc: dict[str, Any]) -> dict[str, Any]:
    """The table without what differs between two runs of the same cells (time, tokens never do)."""
    table = dict(doc["table"])
    table["benchmark"] = {k: v for k, v in table["benchmark"].items() if k != "spec"}
    return table


def test_cells_of_two_folders_merge_into_the_table_of_one(
    full: tuple[Path, Path, Any], bench: Path, hand: Path, tmp_path: Path
) -> None:
    _plan, whole, _result = full
    plan = write_plan(tmp_path, **every_arm(bench, hand))
    first, second = tmp_path / "monday", tmp_path / "tuesday"
    assert compare(plan, "--out", first, "--cells", "seed=0").exit_code == 0
    assert compare(plan, "--out", second, "--cells", "seed=1").exit_code == 0
    merged = table_of(compare("merge", first, second, "--json"))
    assert merged["table"]["cells"] == 8 and merged["table"]["seeds"] == [0, 1]
    assert _numbers(merged) == _numbers(table_of(compare("merge", whole, "--json")))
    assert rows(merged)["evolve"]["per_seed"] == {"0": 100.0, "1": 100.0}
    shown = compare("merge", first, second)
    assert shown.exit_code == 0 and "| evolve | 100.0 ± 0.0 | 100.0, 100.0 |" in shown.stdout


def test_merge_refuses_cells_of_another_model(
    full: tuple[Path, Path, Any], bench: Path, tmp_path: Path
) -> None:
    _plan, whole, _result = full
    plan = write_plan(
        tmp_path, model="scripted/policy:gives_up", benchmark=str(bench), seeds=[2], arms=[{"kind": "seed"}]
    )
    other = tmp_path / "other"
    assert compare(plan, "--out", other).exit_code == 0
    refused = compare("merge", whole, other)
    assert refused.exit_code == 2, refused.output
    error, hint = refused.output.strip().splitlines()
    assert error.startswith(f"Error: {result_file(other, 'seed', 2)}: model.name: ")
    assert "scripted/policy:gives_up" in error and LEARNER in error and "Hint:" in hint


def test_merge_refuses_a_cell_found_twice_with_other_outcomes(
    full: tuple[Path, Path, Any], tmp_path: Path
) -> None:
    _plan, whole, _result = full
    copy = tmp_path / "copy"
    shutil.copytree(whole / "cells" / "seed", copy / "cells" / "seed")
    same = table_of(compare("merge", whole, copy, "--json"))  # the same cell twice counts once
    assert same["table"]["cells"] == 8
    doc = json.loads(result_file(copy, "seed", 0).read_text())
    doc["tasks"] = {task: 1.0 for task in doc["tasks"]}
    result_file(copy, "seed", 0).write_text(json.dumps(doc))
    refused = compare("merge", whole, copy)
    assert refused.exit_code == 2 and "seed/seed-0 is also in" in refused.output, refused.output


def test_merge_refuses_an_arm_defined_otherwise(full: tuple[Path, Path, Any], tmp_path: Path) -> None:
    _plan, whole, _result = full
    copy = tmp_path / "copy"
    shutil.copytree(whole / "cells" / "evolve" / "seed-1", copy / "cells" / "evolve" / "seed-1")
    doc = json.loads(result_file(copy, "evolve", 1).read_text())
    doc["arm"]["config"]["options"]["generations"] = 5
    result_file(copy, "evolve", 1).write_text(json.dumps(doc))
    only_first = tmp_path / "only-seed-0"
    shutil.copytree(whole / "cells" / "evolve" / "seed-0", only_first / "cells" / "evolve" / "seed-0")
    refused = compare("merge", only_first, copy)
    assert refused.exit_code == 2, refused.output
    assert "arm 'evolve' is defined otherwise" in refused.output and "arm.config.options" in refused.output


def test_merge_of_a_folder_without_cells_or_with_a_bad_result_file(
    full: tuple[Path, Path, Any], tmp_path: Path
) -> None:
    _plan, whole, _result = full
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = compare("merge", empty)
    assert nothing.exit_code == 2 and "no finished cell" in nothing.output
    broken = tmp_path / "broken"
    shutil.copytree(whole / "cells" / "hand", broken / "cells" / "hand")
    doc = json.loads(result_file(broken, "hand", 0).read_text())
    doc["tasks"]["count-lines-07"] = 7
    result_file(broken, "hand", 0).write_text(json.dumps(doc))
    bad = compare("merge", broken)
    assert bad.exit_code == 2 and "tasks.count-lines-07" in bad.output and "Traceback" not in bad.output


def test_an_evolve_cell_records_the_defaults_it_ran_under(full: tuple[Path, Path, Any]) -> None:
    _plan, whole, _result = full
    resolved = json.loads(result_file(whole, "evolve", 0).read_text())["arm"]["resolved"]
    assert resolved["proposers"] == ["demo"]  # the plan's EVOLVE options name it
    assert "never_submits" in resolved["detectors"]
    assert resolved["gates"]["source"] == "default.yaml" and len(resolved["gates"]["sha"]) == 16
    assert len(resolved["options"]) == 16
    seed = json.loads(result_file(whole, "seed", 0).read_text())["arm"]
    assert "resolved" not in seed  # only evolve arms resolve run defaults


def test_merge_and_resume_refuse_an_evolve_cell_made_under_other_defaults(
    full: tuple[Path, Path, Any], tmp_path: Path
) -> None:
    """A default changed between two days of one table (here: the default gates) is another
    experiment, though the plan is the same: merge and --resume name the field."""
    plan, whole, _result = full
    copy = tmp_path / "copy"
    shutil.copytree(whole / "cells" / "evolve" / "seed-1", copy / "cells" / "evolve" / "seed-1")
    doc = json.loads(result_file(copy, "evolve", 1).read_text())
    doc["arm"]["resolved"]["gates"]["sha"] = "0" * 16
    result_file(copy, "evolve", 1).write_text(json.dumps(doc))
    only_first = tmp_path / "only-seed-0"
    shutil.copytree(whole / "cells" / "evolve" / "seed-0", only_first / "cells" / "evolve" / "seed-0")
    refused = compare("merge", only_first, copy)
    assert refused.exit_code == 2, refused.output
    assert "arm 'evolve' is defined otherwise" in refused.output and "arm.resolved.gates" in refused.output
    resumed = compare(plan, "--out", copy, "--resume", "--cells", "arm=evolve,seed=1")
    assert resumed.exit_code == 2, resumed.output
    assert "arm.resolved.gates: this cell was made by another plan" in resumed.output
    assert "Traceback" not in resumed.output
    # a fixed-harness cell added to the same folder does not depend on the evolve arm's defaults
    other = compare(plan, "--out", copy, "--resume", "--cells", "arm=seed,seed=1")
    assert other.exit_code == 0, other.output
    assert result_file(copy, "seed", 1).is_file()


def test_resume_names_an_evolve_cell_made_before_defaults_were_recorded(
    full: tuple[Path, Path, Any], tmp_path: Path
) -> None:
    plan, whole, _result = full
    old = tmp_path / "old"
    shutil.copytree(whole / "cells" / "evolve" / "seed-0", old / "cells" / "evolve" / "seed-0")
    doc = json.loads(result_file(old, "evolve", 0).read_text())
    del doc["arm"]["resolved"]
    result_file(old, "evolve", 0).write_text(json.dumps(doc))
    refused = compare(plan, "--out", old, "--resume", "--cells", "arm=evolve,seed=0")
    assert refused.exit_code == 2, refused.output
    assert "before cells recorded their resolved defaults" in refused.output
    assert "run the table's cells from the commit that made it" in refused.output
    # old cells among themselves still merge (a table made before the field, e.g. committed ones)
    assert compare("merge", old).exit_code == 0
