"""Harder variants: chained shell tasks, one more bug for synthesized SWE tasks."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import yaml

from harnessevolve.core import paths
from harnessevolve.core.tasks import load_task
from harnessevolve.synth.variants import chain, level_of, more_mutations, synthesized_parts

ONECALL = paths.builtin_dir("benchmarks") / "shell-onecall" / "tasks"
SWE = paths.builtin_dir("benchmarks") / "swe-synth" / "tasks"


def docs(folder: Path) -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml"))]


def write_and_load(doc: dict, tmp_path: Path):
    path = tmp_path / f"{doc['id']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_task(path)


def test_chain_adds_one_partner_per_level_and_loads(tmp_path):
    pool = [d for d in docs(ONECALL) if d["split"] == "train"]
    parent = pool[0]
    variant = chain(parent, pool, seed=0)
    assert variant is not None and variant.difficulty == {"steps": 2, "level": 2}
    task = write_and_load(variant.doc, tmp_path)
    assert task.split == "train" and task.tags[0] == parent["tags"][0] and "generated" in task.tags
    assert len(task.checks) > len(parent["checker"])
    assert task.gold[-1].tool == "submit" and sum(g.tool == "submit" for g in task.gold) == 1
    assert parent["instruction"].strip() in task.instruction
    deeper = chain(variant.doc, pool, seed=0)
    assert deeper is not None and level_of(deeper.doc) == 3 and deeper.difficulty["steps"] == 3
    assert chain(parent, pool, seed=0) == variant  # deterministic


def test_chain_never_merges_colliding_files():
    pool = [d for d in docs(ONECALL) if d["split"] == "train"]
    parent = pool[0]
    same_files = [{**d, "setup": parent["setup"]} for d in pool[1:]]
    assert chain(parent, same_files, seed=0) is None


def test_synthesized_task_reads_back_its_original():
    parent = docs(SWE)[0]
    parts = synthesized_parts(parent)
    assert parts is not None
    original, test_files, stable = parts
    assert original != parent["setup"]["files"] and set(test_files) and len(stable) > 10
    assert synthesized_parts(docs(ONECALL)[0]) is None


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_more_mutations_breaks_more_tests(tmp_path):
    parent = next(d for d in docs(SWE) if d["split"] == "train")
    variant = asyncio.run(more_mutations(parent, seed=1))
    assert variant is not None
    assert variant.difficulty["mutations"] == 2 and level_of(variant.doc) == 2
    task = write_and_load(variant.doc, tmp_path)
    assert task.gold[0].tool == "bash" and "HE_PATCH" in task.gold[0].arguments["command"]
    assert task.setup_files != parent["setup"]["files"]
