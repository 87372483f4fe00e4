"""benchmarks/perf/component_ablation.py --smoke: every arm runs and is scored on scripted models,
and the JSON has what the results folder needs (command, seeds, per-arm pass rates, tokens,
seconds, load average). A check of the script, never a measurement."""

from __future__ import annotations

import json
from pathlib import Path

from test_vs_gepa import load_script

from harnessevolve.models.scripted import unregister_script

ablation = load_script("component_ablation")


def test_smoke_runs_every_arm_and_writes_the_json(tmp_path: Path) -> None:
    out = tmp_path / "ablation.json"
    try:
        assert ablation.main(["--smoke", "--out", str(out)]) == 0
    finally:
        unregister_script("component-ablation-smoke")
    document = json.loads(out.read_text())
    assert document["smoke"] is True and "component_ablation.py --smoke" in document["command"]
    assert set(document["arms"]) == set(ablation.ARMS)
    assert len(document["seeds"]) == len(document["arms"]["base"]["pass_rates"]) == 2
    assert len(document["load_average"]["start"]) == 3
    for seed in document["seeds"]:
        for arm in ablation.ARMS:
            row = seed[arm]
            assert row["tasks"] == 3 and row["tokens"] > 0 and row["seconds"] >= 0
            assert row["component_errors"] == 0
    # the smoke agent submits only when a component's note tells it to: recovery is the one that
    # does. Tasks judged on the workspace alone (write a file) pass without a submit in every arm.
    assert document["arms"]["recovery"]["pass_rate_mean"] == 1.0
    assert all(document["arms"][arm]["pass_rate_mean"] < 1.0 for arm in ablation.ARMS if arm != "recovery")
    assert all(seed["recovery"]["recovery_fired"] > 0 for seed in document["seeds"])
    assert all(seed["base"]["recovery_fired"] == 0 for seed in document["seeds"])
