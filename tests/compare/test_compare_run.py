"""``harnessevolve compare PLAN``: every arm kind on a built-in suite slice, cell by cell, with the
scripted learner (fails the seed harness, solves a family once the prompt demonstrates it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import git
import pytest
import yaml
from compare_plans import (
    EVOLVE,
    LEARNER,
    compare,
    read_result,
    result_file,
    rows,
    table_of,
    write_plan,
)

from harnessevolve import __version__
from harnessevolve.runs import events as ev
from harnessevolve.runs.ledger import read_ledger
from harnessevolve.scoring.best_of_k import matched_k


def test_every_arm_kind_runs_into_its_own_cell_and_the_table(full: tuple[Path, Path, Any]) -> None:
    _plan, out, result = full
    doc = table_of(result)
    assert doc["comparison"]["ran"] == [
        f"{arm}/seed-{s}" for s in (0, 1) for arm in ("seed", "evolve", "hand", "best-of-k")
    ]
    for line in (f"[{i}/8]" for i in range(1, 9)):
        assert line in result.output  # one progress line per finished cell
    assert "elapsed" in result.output
    table = rows(doc)
    assert list(table) == ["seed", "evolve", "best-of-k (sc)", "best-of-k (pass@k oracle)", "hand"]
    # the learner fails the seed harness everywhere; the evolved and the hand-edited harnesses
    # demonstrate the family, so they pass its test tasks
    assert table["seed"]["per_seed"] == {"0": 0.0, "1": 0.0}
    assert table["evolve"]["per_seed"] == {"0": 100.0, "1": 100.0}
    assert table["hand"]["mean"] == 100.0 and table["hand"]["sd"] == 0.0
    gain = table["evolve"]["vs_seed"]
    assert gain["points"] == 100.0 and gain["pairs"] == 4 and gain["wins"] == 4 and gain["losses"] == 0
    assert gain["ci"] == [100.0, 100.0]
    assert table["evolve"]["vs_best_of_k_sc"]["against"] == "best-of-k (sc)"
    assert table["seed"]["vs_seed"] is None and table["best-of-k (pass@k oracle)"]["vs_best_of_k_sc"] is None


def test_best_of_k_is_matched_to_the_evolve_cell_of_its_seed(full: tuple[Path, Path, Any]) -> None:
    _plan, out, _result = full
    for seed in (0, 1):
        evolve, sampled = read_result(out, "evolve", seed), read_result(out, "best-of-k", seed)
        tests = sampled["benchmark"]["test_tasks"]
        k = matched_k(evolve["rollouts"], tests)
        assert evolve["rollouts"] > 0 and sampled["details"]["k"] == k
        assert sampled["details"]["matched_rollouts"] == evolve["rollouts"]
        assert sampled["rollouts"] == k * tests  # the control spends what the run spent, to rounding
        assert set(sampled["oracle"]) == set(sampled["tasks"])
        assert all(sampled["oracle"][t] >= sampled["tasks"][t] for t in sampled["tasks"])
        assert sampled["test"]["rollouts"] + sampled["test"]["cached"] == k * tests


def test_a_result_file_says_what_made_it(full: tuple[Path, Path, Any]) -> None:
    plan, out, _result = full
    evolve = read_result(out, "evolve", 0)
    assert evolve["version"] == 1 and evolve["seed"] == 0
    assert {k: v for k, v in evolve["arm"].items() if k != "resolved"} == {
        "name": "evolve",
        "kind": "evolve",
        "config": {"kind": "evolve", "options": EVOLVE},
    }
    assert evolve["arm"]["resolved"]["proposers"] == EVOLVE["proposers"]
    assert evolve["model"] == {"name": LEARNER, "sha256": None}
    assert evolve["benchmark"]["name"] == "shell-basics" and evolve["benchmark"]["test_tasks"] == 2
    assert evolve["scorer"]["sandbox"] == "bwrap" and evolve["scorer"]["scorer"].endswith("Scorer")
    assert evolve["harnessevolve"]["version"] == __version__
    assert evolve["command"] == f"harnessevolve compare run {plan} --out {out}"
    assert len(evolve["load_average"]["start"]) == 3 and evolve["wall_s"] > 0 and evolve["attempts"] == 1
    assert set(evolve["tasks"]) == {"count-lines-07", "count-lines-08"}
    assert evolve["details"]["accepted"] >= 1 and evolve["tokens"] > 0
    # the evolved harness differs from the seed; the seed cell scored the seed itself
    seed = read_result(out, "seed", 0)
    assert seed["harness"] == seed["seed_harness"] != evolve["harness"]
    # the run happened in the cell's own repository, its ledger beside it
    harness = out / "cells" / "evolve" / "seed-0" / "work" / "harness"
    assert git.Repo(harness).working_tree_dir == str(harness)
    assert "cells/*/*/work/" in (out / ".gitignore").read_text()


def test_resume_skips_finished_cells_and_a_folder_with_cells_needs_it(
    full: tuple[Path, Path, Any], tmp_path: Path
) -> None:
    plan, out, _result = full
    again = compare(plan, "--out", out)
    assert again.exit_code == 2 and "--resume" in again.output, again.output
    before = {p: p.stat().st_mtime_ns for p in (out / "cells").glob("*/*/result.json")}
    resumed = compare(plan, "--out", out, "--resume", "--json")
    doc = table_of(resumed)
    assert doc["comparison"]["ran"] == [] and len(doc["comparison"]["skipped"]) == 8
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_resume_refuses_cells_made_by_another_plan(full: tuple[Path, Path, Any], tmp_path: Path) -> None:
    plan, out, _result = full
    doc = yaml.safe_load(plan.read_text())
    doc["arms"][1]["options"] = {**EVOLVE, "generations": 2}
    changed = write_plan(tmp_path, **{k: v for k, v in doc.items() if k != "version"})
    refused = compare(changed, "--out", out, "--resume")
    assert refused.exit_code == 2, refused.output
    first = refused.output.splitlines()[0]
    assert str(result_file(out, "evolve", 0)) in first and "arm.config" in first


def test_resume_refuses_a_folder_holding_cells_of_another_model_before_any_cell(
    full: tuple[Path, Path, Any], bench: Path, tmp_path: Path
) -> None:
    import shutil

    out = tmp_path / "out"
    shutil.copytree(full[1] / "cells" / "seed", out / "cells" / "seed")
    plan = write_plan(
        tmp_path,
        model="scripted/policy:gives_up",
        benchmark=str(bench),
        seeds=[0],
        arms=[{"name": "mine", "kind": "seed"}],
    )
    refused = compare(plan, "--out", out, "--resume")
    assert refused.exit_code == 2, refused.output
    assert refused.output.startswith(
        f"Error: {result_file(out, 'seed', 0)}: model.name: this cell was made by another plan"
    )
    assert not (out / "cells" / "mine").exists() and not (out / "plan.yaml").exists()


def test_cells_picks_some_and_a_matched_control_needs_its_evolve_cell(bench: Path, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        model=LEARNER,
        benchmark=str(bench),
        seeds=[0, 1],
        arms=[{"kind": "seed"}, {"name": "evolve", "kind": "evolve", "options": EVOLVE},
              {"kind": "best-of-k", "matched_to": "evolve"}],
    )  # fmt: skip
    out = tmp_path / "out"
    lonely = compare(plan, "--out", out, "--cells", "arm=best-of-k")
    assert lonely.exit_code == 2 and "evolve/seed-0" in lonely.output, lonely.output
    assert not out.exists()  # refused before any cell
    picked = table_of(
        compare(plan, "--out", out, "--cells", "arm=seed,seed=1", "--cells", "seed=0,kind=seed", "--json")
    )
    assert picked["comparison"]["ran"] == ["seed/seed-0", "seed/seed-1"]  # either selector picks a cell
    nothing = compare(plan, "--out", out, "--resume", "--cells", "arm=gepa")
    assert nothing.exit_code == 2 and "picks no cell" in nothing.output


def test_max_hours_stops_between_cells_and_resume_goes_on(bench: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, model=LEARNER, benchmark=str(bench), seeds=[0, 1], arms=[{"kind": "seed"}])
    out = tmp_path / "out"
    stopped = table_of(compare(plan, "--out", out, "--max-hours", "0", "--json"))
    assert stopped["comparison"]["ran"] == [] and stopped["comparison"]["left"] == [
        "seed/seed-0",
        "seed/seed-1",
    ]
    assert stopped["comparison"]["stopped"].startswith("--max-hours 0 reached")
    went_on = table_of(compare(plan, "--out", out, "--resume", "--json"))
    assert went_on["comparison"]["ran"] == ["seed/seed-0", "seed/seed-1"]


def test_markdown_table_is_printed_by_default(bench: Path, hand: Path, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        model=LEARNER,
        benchmark=str(bench),
        seeds=[3],
        arms=[{"kind": "seed"}, {"name": "hand", "kind": "harness", "path": str(hand)}],
    )
    shown = compare(plan, "--out", tmp_path / "out")
    assert shown.exit_code == 0, shown.output
    table = [line for line in shown.stdout.splitlines() if line.startswith("|")]
    assert table[0].startswith("| arm | test (mean ± sd) |")
    assert table[2].startswith("| seed | 0.0 |") and table[3].startswith("| hand | 100.0 | 100.0 | +100.0 [")


def test_a_harness_arm_at_a_git_revision_scores_that_revision(
    bench: Path, hand: Path, tmp_path: Path
) -> None:
    """The hand harness's demonstration is not committed: at HEAD it is the bare template."""
    plan = write_plan(
        tmp_path,
        model=LEARNER,
        benchmark=str(bench),
        seeds=[0],
        arms=[{"name": "now", "kind": "harness", "path": str(hand)},
              {"name": "head", "kind": "harness", "path": str(hand), "revision": "HEAD"}],
    )  # fmt: skip
    table = rows(table_of(compare(plan, "--out", tmp_path / "out", "--json")))
    assert table["now"]["mean"] == 100.0 and table["head"]["mean"] == 0.0


def test_an_evolve_arm_with_a_start_harness_runs_from_it(bench: Path, hand: Path, tmp_path: Path) -> None:
    """``start``: the run begins from the hand harness (its demonstration already solves the
    family, so the learner passes; a second demonstration would confuse it and is refused), and
    the arm is defined by the start harness's content."""
    from harnessevolve.harness.load import load_harness

    plan = write_plan(
        tmp_path,
        model=LEARNER,
        benchmark=str(bench),
        seeds=[0],
        arms=[{"kind": "seed"},
              {"name": "from-hand", "kind": "evolve", "options": EVOLVE, "start": str(hand)}],
    )  # fmt: skip
    out = tmp_path / "out"
    table = rows(table_of(compare(plan, "--out", out, "--json")))
    assert table["seed"]["mean"] == 0.0 and table["from-hand"]["mean"] == 100.0
    doc = read_result(out, "from-hand", 0)
    assert doc["arm"]["config"]["start"] == load_harness(hand).content_hash()
    first = out / "cells" / "from-hand" / "seed-0" / "work" / "harness" / "prompts" / "examples.md"
    assert "## Example" in first.read_text()


KILLED = 86


def _in_child(body: Any) -> int:
    """Run ``body`` in a forked child; its exit status (``KILLED`` when the kill fired)."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            body()
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status)
    return os.WEXITSTATUS(status)


def test_a_cell_killed_mid_run_has_no_result_and_resume_finishes_it(
    full: tuple[Path, Path, Any], bench: Path, tmp_path: Path
) -> None:
    from harnessevolve.runs.ledger import Ledger

    plan = write_plan(
        tmp_path,
        model=LEARNER,
        benchmark=str(bench),
        seeds=[0],
        arms=[{"kind": "seed"}, {"name": "evolve", "kind": "evolve", "options": EVOLVE},
              {"kind": "best-of-k", "matched_to": "evolve"}],
    )  # fmt: skip
    out = tmp_path / "out"

    def killed_after_the_baseline() -> None:
        with pytest.MonkeyPatch.context() as patch:
            real = Ledger.append

            def append(self: Ledger, event: Any, **data: Any) -> dict[str, Any]:
                line = real(self, event, **data)
                if line["event"] == ev.Baseline.NAME:
                    os._exit(KILLED)  # kill -9 in the middle of the evolve cell's run
                return line

            patch.setattr(Ledger, "append", append)
            compare(plan, "--out", out)

    assert _in_child(killed_after_the_baseline) == KILLED
    seed_file = result_file(out, "seed", 0)
    assert seed_file.is_file()
    assert not result_file(out, "evolve", 0).exists()  # a killed cell is never counted
    assert not result_file(out, "best-of-k", 0).exists()
    seed_before = (seed_file.read_bytes(), seed_file.stat().st_mtime_ns)
    [run] = list(
        (out / "cells" / "evolve" / "seed-0" / "work" / "harness" / ".harnessevolve" / "runs").iterdir()
    )

    doc = table_of(compare(plan, "--out", out, "--resume", "--json"))
    assert doc["comparison"]["ran"] == ["evolve/seed-0", "best-of-k/seed-0"]
    assert doc["comparison"]["skipped"] == ["seed/seed-0"]
    assert (seed_file.read_bytes(), seed_file.stat().st_mtime_ns) == seed_before  # not rerun
    evolve = read_result(out, "evolve", 0)
    assert evolve["attempts"] == 2 and evolve["details"]["resumed"] is True
    assert evolve["details"]["run_id"] == run.name  # the killed run itself, resumed from its ledger
    events = read_ledger(run / "ledger.jsonl")
    assert sum(isinstance(e, ev.RunResumed) for e in events) == 1
    assert sum(isinstance(e, ev.RunStarted) for e in events) == 1
    assert rows(doc)["evolve"]["per_seed"] == {"0": 100.0}
    # the same cell run in one go (the session's comparison): the same harness, the same budget,
    # so best-of-k gets the same k
    in_one_go = read_result(full[1], "evolve", 0)
    assert evolve["harness"] == in_one_go["harness"] and evolve["tasks"] == in_one_go["tasks"]
    assert evolve["rollouts"] == in_one_go["rollouts"] and evolve["details"]["cached_rollouts"] > 0
    assert (
        read_result(out, "best-of-k", 0)["details"]["k"]
        == read_result(full[1], "best-of-k", 0)["details"]["k"]
    )


def test_an_interrupt_inside_a_cell_exits_130_and_keeps_the_finished_ones(
    bench: Path, hand: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harnessevolve.compare import arms

    plan = write_plan(
        tmp_path,
        model=LEARNER,
        benchmark=str(bench),
        seeds=[0],
        arms=[{"kind": "seed"}, {"name": "hand", "kind": "harness", "path": str(hand)}],
    )
    out = tmp_path / "out"
    real = arms.score_harness

    def interrupted(ctx: Any, harness: Any, seed: int, work: Path, label: str) -> Any:
        if label.startswith("hand"):
            raise KeyboardInterrupt
        return real(ctx, harness, seed, work, label)

    monkeypatch.setattr(arms, "score_harness", interrupted)
    stopped = compare(plan, "--out", out)
    assert stopped.exit_code == 130, stopped.output
    assert "--resume" in stopped.output and "1 cell(s) finished" in stopped.output
    assert result_file(out, "seed", 0).is_file() and not result_file(out, "hand", 0).exists()
    monkeypatch.setattr(arms, "score_harness", real)
    doc = table_of(compare(plan, "--out", out, "--resume", "--json"))
    assert doc["comparison"]["ran"] == ["hand/seed-0"] and read_result(out, "hand", 0)["attempts"] == 2


def test_max_cost_usd_counts_what_finished_cells_cost_and_stops_between_cells(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harnessevolve.models import pricing

    monkeypatch.setattr(pricing, "_GIVEN", {LEARNER: pricing.Price(1000.0, 1000.0)})
    plan = write_plan(tmp_path, model=LEARNER, benchmark=str(bench), seeds=[0, 1], arms=[{"kind": "seed"}])
    out = tmp_path / "out"
    stopped = table_of(compare(plan, "--out", out, "--max-cost-usd", "0.000001", "--json"))
    spent = read_result(out, "seed", 0)["cost_usd"]
    assert spent > 0  # the learner's tokens at the given price: the scoring's model calls
    assert stopped["comparison"]["ran"] == ["seed/seed-0"] and stopped["comparison"]["left"] == [
        "seed/seed-1"
    ]
    assert stopped["comparison"]["stopped"].startswith("--max-cost-usd 1e-06 reached")
    assert stopped["comparison"]["cost_usd"] == pytest.approx(spent, abs=1e-6)
    row = rows(stopped)["seed"]
    assert row["cost_usd_mean"] == pytest.approx(spent, abs=1e-6)


def test_html_page_holds_the_table_and_its_plots_without_script(
    full: tuple[Path, Path, Any], tmp_path: Path
) -> None:
    _plan, out, _result = full
    page = tmp_path / "compare.html"
    merged = compare("merge", out, "--html", page)
    assert merged.exit_code == 0, merged.output
    html = page.read_text()
    assert (
        html.startswith("<!doctype html>")
        and "<script" not in html
        and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    assert html.count("<svg") == 2  # scores per seed; differences against the seed arm
    for label in ("seed", "evolve", "best-of-k (sc) k=", "best-of-k (pass@k oracle)", "hand"):
        assert f"<td>{label}" in html
    assert 'class="win"' in html  # evolve's interval is above zero
    assert "evolve, seed 0: 100.0" in html  # each seed's dot carries its value
    bad = compare("merge", out, "--html", tmp_path)
    assert bad.exit_code == 2 and "--html" in bad.output
