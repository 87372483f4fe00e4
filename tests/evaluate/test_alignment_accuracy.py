"""The labelled perturbation set of benchmarks/perf/alignment_accuracy.py: built deterministically,
labels consistent with the perturbed runs, and first_divergence right on a sample."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from harnessevolve.core.paths import builtin_dir
from harnessevolve.core.signals import Cause
from harnessevolve.evaluate.alignment import actions

SCRIPT = builtin_dir("benchmarks") / "perf" / "alignment_accuracy.py"
spec = importlib.util.spec_from_file_location("alignment_accuracy", SCRIPT)
assert spec is not None and spec.loader is not None
accuracy = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = accuracy  # dataclasses look their module up
spec.loader.exec_module(accuracy)

SAMPLE = [
    builtin_dir("trajectories") / "shell-basics" / "replace-word-01.json",  # bash, read_file, submit
    builtin_dir("trajectories") / "shell-basics" / "count-lines-01.json",  # bash, submit(answer)
    builtin_dir("trajectories") / "shell-onecall" / "write-file-01.json",  # write_file, submit(done)
]


@pytest.fixture(scope="module")
def items():
    return accuracy.build_set(SAMPLE)


def test_the_builder_is_deterministic_and_covers_every_kind(items) -> None:
    again = accuracy.build_set(SAMPLE)
    assert [(i.kind, i.step, i.cause, i.run.to_dict()) for i in items] == [
        (i.kind, i.step, i.cause, i.run.to_dict()) for i in again
    ]
    assert {i.kind for i in items} == set(accuracy.KINDS)


def test_labels_are_consistent_with_the_perturbed_runs(items) -> None:
    for item in items:
        run, ref = actions(item.run), actions(item.reference)
        positions = [a.step_id for a in run]
        assert item.step in positions, item  # the label names an agent step of the run
        k = positions.index(item.step)
        if not item.noisy:  # before the label the run is the reference, call for call
            assert [(a.tool, a.arguments) for a in run[:k]] == [(a.tool, a.arguments) for a in ref[:k]], item
            at = run[k]
            assert (at.tool, at.arguments) != (ref[k].tool, ref[k].arguments), item
        expected = {
            "insert": Cause.EXTRA_STEP,
            "reorder": Cause.SKIPPED_STEP,
            "change_arg": Cause.WRONG_ARGUMENT,
            "swap_tool": Cause.WRONG_TOOL,
            "stop_early": Cause.PREMATURE_FINISH,
            "break_format": Cause.FORMAT_ERROR,
        }.get(item.kind)
        if item.kind == "drop":
            expected = Cause.PREMATURE_FINISH if run[k].tool == "submit" else Cause.SKIPPED_STEP
        assert item.cause == expected, item
        if item.kind == "break_format":
            assert run[k].tool is None and run[k].error.startswith("parse_error")
        if item.kind == "swap_tool":
            assert run[k].tool != ref[k].tool
        if item.kind == "stop_early":
            assert run[k].tool == "submit" and ref[k].tool != "submit"


def test_noise_changes_the_text_but_not_the_label(items) -> None:
    noisy = [(i, item) for i, item in enumerate(items) if item.noisy]
    assert len(noisy) >= len(items) / 3
    for i, item in noisy:
        clean = items[i - 1]  # each noisy variant follows its clean perturbation
        assert not clean.noisy
        assert (clean.kind, clean.step, clean.cause) == (item.kind, item.step, item.cause)
        assert clean.run.to_dict() != item.run.to_dict()


def test_first_divergence_gets_the_sample_right(items) -> None:
    outcomes = accuracy.score(items)
    misses = [
        (o.item.kind, o.item.task_id, o.step, o.cause) for o in outcomes if not (o.step_ok and o.cause_ok)
    ]
    assert misses == []


def test_the_full_set_is_large_enough() -> None:
    paths = accuracy.reference_paths()
    assert {p.parent.name for p in paths} == {"shell-basics", "shell-onecall"}
    assert len(accuracy.build_set(paths[:8])) >= 50  # the whole set is about 1,200
