"""Mutation sites and splices: every operator found, splices touch only their span, mutants parse."""

from __future__ import annotations

import ast

from harnessevolve.synth.mutate import apply, changed_lines, find_mutations

SOURCE = '''"""Module docstring: never mutated."""
import os

__all__ = ["clamp", "total"]


def clamp(x, low, high):
    """Docstring."""
    if x < low:
        return low
    if x > high and high is not None:
        return high
    return x


def total(items):
    acc = 0
    for item in items:
        acc += item * 2
    print("done", acc)
    return acc + items[0]
'''


def test_every_operator_family_is_found():
    found = find_mutations("m.py", SOURCE)
    families = {m.operator for m in found}
    assert {
        "compare-flip",
        "arith-swap",
        "bool-swap",
        "off-by-one",
        "drop-statement",
        "drop-branch",
        "negate-condition",
        "swap-args",
    } <= families
    assert all(m.function in ("clamp", "total") for m in found)  # imports, __all__, docstrings untouched


def test_a_splice_changes_only_its_span_and_parses():
    for m in find_mutations("m.py", SOURCE):
        mutant = apply(SOURCE, [m])
        ast.parse(mutant)
        assert mutant[: m.start] == SOURCE[: m.start]
        assert mutant[m.start + len(m.replacement) :] == SOURCE[m.end :]
        before, after = changed_lines(SOURCE, mutant)
        assert before and after and before != after
        assert after in mutant and SOURCE.replace(before, "", 1) != SOURCE


def test_flip_is_the_expected_text():
    flips = [m for m in find_mutations("m.py", SOURCE) if m.operator == "compare-flip"]
    assert ("x < low", "x <= low") in {(m.original, m.replacement) for m in flips}


def test_order_is_deterministic_and_bad_source_has_none():
    assert find_mutations("m.py", SOURCE) == find_mutations("m.py", SOURCE)
    assert find_mutations("bad.py", "def (:\n") == []


def test_several_mutations_splice_together():
    found = find_mutations("m.py", SOURCE)
    a = next(m for m in found if m.operator == "compare-flip")
    b = next(m for m in found if m.operator == "arith-swap")
    both = apply(SOURCE, [b, a])
    assert a.replacement in both and b.replacement in both
    ast.parse(both)
