"""Unified diffs applied by content (the code edit op's engine): what small models get wrong in a
patch is tolerated (hunk line numbers and counts, a bare @@, blank context lines without their
space), what would change the wrong place is refused, and nothing is ever half-applied."""

from __future__ import annotations

import difflib

import pytest

from harnessevolve.optimize.unified_diff import DiffError, apply_diff, parse_diff

CODE = "import os\n\n\ndef main():\n    x = 1\n    return x\n\n\ndef other():\n    return 2\n"


def made_diff(old: str, new: str, path: str = "agent.py") -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))


def test_a_difflib_patch_round_trips() -> None:
    new = CODE.replace("    x = 1\n", "    x = 41\n    x += 1\n").replace("return 2", "return 3")
    diff = parse_diff(made_diff(CODE, new))
    assert diff.old_path == diff.new_path == "agent.py"
    assert apply_diff(CODE, diff) == new


def test_wrong_line_numbers_and_counts_are_ignored() -> None:
    patch = "--- agent.py\n+++ agent.py\n@@ -90,7 +90,9 @@\n def main():\n-    x = 1\n+    x = 2\n"
    assert apply_diff(CODE, parse_diff(patch)) == CODE.replace("x = 1", "x = 2")


def test_a_bare_header_and_blank_context_lines_without_a_space() -> None:
    patch = "@@\n     return x\n\n\n def other():\n-    return 2\n+    return 5\n"
    assert apply_diff(CODE, parse_diff(patch)) == CODE.replace("return 2", "return 5")


def test_fenced_reply_is_read() -> None:
    reply = "Here is the change:\n```diff\n@@ -5 +5 @@\n-    x = 1\n+    x = 7\n```\nDone."
    assert apply_diff(CODE, parse_diff(reply)) == CODE.replace("x = 1", "x = 7")


def test_an_ambiguous_hunk_uses_the_line_number_or_is_refused() -> None:
    code = "a\nx\nb\nx\nc\n"
    assert apply_diff(code, parse_diff("@@ -4,1 +4,1 @@\n-x\n+y\n")) == "a\nx\nb\ny\nc\n"
    with pytest.raises(DiffError, match="occur 2 times"):
        apply_diff(code, parse_diff("@@\n-x\n+y\n"))


def test_a_hunk_that_is_not_in_the_file_names_the_closest_line() -> None:
    with pytest.raises(DiffError, match=r"not in the file.*closest line is '    x = 1'"):
        apply_diff(CODE, parse_diff("@@ -5 +5 @@\n-    x = 10\n+    x = 2\n"))


def test_all_or_nothing_when_a_later_hunk_fails() -> None:
    patch = "@@ -5 +5 @@\n-    x = 1\n+    x = 2\n@@ -10 +10 @@\n-    return 99\n+    return 3\n"
    with pytest.raises(DiffError, match="hunk 2"):
        apply_diff(CODE, parse_diff(patch))


def test_new_file_and_malformed_diffs() -> None:
    created = parse_diff("--- /dev/null\n+++ b/hooks/h.py\n@@ -0,0 +1,2 @@\n+A = 1\n+B = 2\n")
    assert created.creates and apply_diff(None, created) == "A = 1\nB = 2\n"
    with pytest.raises(DiffError, match="exists"):
        apply_diff("x\n", created)
    with pytest.raises(DiffError, match="no hunks"):
        parse_diff("just some prose, no diff")
    with pytest.raises(DiffError, match="neither"):
        parse_diff("@@ -1 +1 @@\n-a\n*b\n")
    with pytest.raises(DiffError, match="more than one file"):
        parse_diff(made_diff("a\n", "b\n", "x.py") + made_diff("a\n", "b\n", "y.py"))
    with pytest.raises(DiffError, match="changes nothing"):
        parse_diff("@@ -1 +1 @@\n a\n")
