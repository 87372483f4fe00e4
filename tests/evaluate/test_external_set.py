"""The external labelled set (benchmarks/perf/external/, made from BFCL's gold calls by
make_external_set.py): every cause, both tool-definition placements, multi-turn runs, benign
variations; labels name real steps; first_divergence meets the targets on it and on the held-out
part. The generator is deterministic (checked when the bfcl-eval data is at $BFCL_DIR)."""

from __future__ import annotations

import gzip
import importlib
import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from harnessevolve.core.paths import builtin_dir
from harnessevolve.core.signals import Cause
from harnessevolve.evaluate.alignment import first_divergence

PERF = builtin_dir("benchmarks") / "perf"
sys.path.insert(0, str(PERF))
external_set = importlib.import_module("external_set")


FILES = {"tune": external_set.TUNE, "heldout": external_set.HELD_OUT, "nl2bash": external_set.NL2BASH}


@pytest.fixture(scope="module", params=sorted(FILES))
def items(request):
    return external_set.read_set(FILES[request.param])


def test_the_set_covers_every_cause_placement_turns_and_benign_variation(items) -> None:
    causes = Counter(i.cause for i in items)
    assert set(causes) == set(Cause) and min(causes.values()) >= 50
    if items[0].source.startswith("bfcl"):  # tool definitions in v1.5 agent.tool_definitions and agent.extra
        assert {bool(i.reference.tool_definitions) for i in items} == {True, False}
    assert all(i.reference.tool_definitions or i.reference.agent_extra["tool_definitions"] for i in items)
    assert any(sum(s.source == "user" for s in i.reference.steps) >= 3 for i in items)
    benign = {b for i in items for b in i.benign}
    assert benign == {
        "reordered_keys",
        "number_form",
        "whitespace",
        "read_only_call",
        "narration",
        "retried_error",
    }
    assert 0.25 < sum(i.noisy for i in items) / len(items) < 0.6


def test_labels_name_steps_of_their_trajectories(items) -> None:
    for item in items:
        run_ids = {s.step_id for s in item.run.steps}
        ref_ids = {s.step_id for s in item.reference.steps}
        if item.cause is Cause.SETUP_ERROR:
            assert item.step is None and not any(s.source == "agent" for s in item.run.steps)
            continue
        assert item.step in run_ids, item.kind
        assert item.reference_step is None or item.reference_step in ref_ids
        assert item.run.to_dict() != item.reference.to_dict()


def test_first_divergence_meets_the_targets(items) -> None:
    right_step = right_cause = 0
    for item in items:
        signal = first_divergence(item.run, item.reference)
        right_step += signal.step == item.step
        right_cause += signal.cause == item.cause
    assert right_step / len(items) >= 0.95 and right_cause / len(items) >= 0.90


@pytest.mark.skipif(not os.environ.get("BFCL_DIR"), reason="needs the bfcl-eval data: set BFCL_DIR")
def test_the_generator_is_deterministic(tmp_path: Path) -> None:
    make = importlib.import_module("make_external_set")
    bfcl_source = importlib.import_module("bfcl_source")
    root = bfcl_source.package_root(Path(os.environ["BFCL_DIR"]))
    first = make.build(root, ("base",), 3, 7)
    make.write(first, tmp_path / "a.json.gz")
    make.write(make.build(root, ("base",), 3, 7), tmp_path / "b.json.gz")
    assert (tmp_path / "a.json.gz").read_bytes() == (tmp_path / "b.json.gz").read_bytes()
    assert json.loads(gzip.decompress((tmp_path / "a.json.gz").read_bytes()))["items"]
