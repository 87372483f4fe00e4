"""One trailer parser, with git's own semantics: checked against ``git interpret-trailers --parse``."""

from __future__ import annotations

import subprocess

import pytest

from harnessevolve.core.trailers import parse_trailers, trailer_map

MESSAGES = {
    "ours": "harnessevolve: add a skill\n\nWhy it helps.\n\nTargets: wrong_tool\nRun: r1\nGeneration: 2\n",
    "rationale_looks_like_trailers": (
        "harnessevolve: tweak\n\nRun: fake-run\nGeneration: 9\nThis line is prose.\n\n"
        "Targets: x\nRun: r1\nGeneration: 2\n"
    ),
    "trailers_only_in_the_body": "subject\n\nRun: r1\nGeneration: 2\n\nJust a closing remark.\n",
    "subject_only": "Run: r1\n",
    "one_paragraph": "subject\nRun: r1\n",
    "continuation": "subject\n\nbody\n\nEvidence: a long\n  line that goes on\nRun: r1\n",
    "signed_off_with_text": "subject\n\nbody\n\nsome text\nmore text\nmore\nSigned-off-by: A <a@b>\n",
    "mostly_text_no_git_trailer": "subject\n\nbody\n\nsome text\nmore text\nRun: r1\n",
    "trailing_blank_lines": "subject\n\nRun: r1\nGeneration: 3\n\n\n",
    "space_before_colon": "subject\n\nRun : r1\n",
    "comment_lines": "subject\n\nRun: r1\n# a comment\n",
}


def git_trailers(message: str) -> list[tuple[str, str]]:
    out = subprocess.run(
        ["git", "interpret-trailers", "--parse"], input=message, capture_output=True, text=True, check=True
    ).stdout
    return [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in out.splitlines())]


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_trailers_match_git_interpret_trailers(name: str) -> None:
    message = MESSAGES[name]
    if name == "comment_lines":
        message = message.replace("# a comment\n", "")  # git keeps '#' lines here; commit strips them
    assert parse_trailers(MESSAGES[name]) == git_trailers(message)


def test_prose_in_a_rationale_is_never_a_trailer() -> None:
    tags = trailer_map(MESSAGES["rationale_looks_like_trailers"])
    assert tags == {"Targets": "x", "Run": "r1", "Generation": "2"}
    assert trailer_map(MESSAGES["trailers_only_in_the_body"]) == {}
