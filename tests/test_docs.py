"""Every `harnessevolve ...` command line in the docs' ```bash and ```text blocks is accepted by the
real command-line parser (options, types, ranges), so documented commands cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from cli.test_ci_examples import harnessevolve_commands, parse_command_line

DOCS = Path(__file__).parents[1] / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
STAGE_PAGES = ("execute", "evaluate", "optimize", "gate", "pipeline", "report")
FENCE = re.compile(r"^ {0,3}```(\w*)[^\n]*\n(.*?)^ {0,3}```", re.DOTALL | re.MULTILINE)
SHELL_BLOCKS = ("bash", "text")
PLACEHOLDER = "..."
"""A command line holding this (an elided argument) is prose, not a command to check."""


def documented_commands(markdown: str) -> list[tuple[str, list[str]]]:
    """(the line, its argv after the program name) for each line of a ```bash or ```text block that
    starts with `harnessevolve ` or `$ harnessevolve ` (backslash continuations joined)."""
    found = []
    for language, body in FENCE.findall(markdown):
        if language not in SHELL_BLOCKS:
            continue
        for line in re.sub(r"\\\n\s*", " ", body).splitlines():
            command = line.strip().removeprefix("$ ")
            if not command.startswith("harnessevolve ") or PLACEHOLDER in command:
                continue
            found += [(command, argv) for argv in harnessevolve_commands(command, {})]
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_every_documented_command_line_parses(page: Path) -> None:
    for line, argv in documented_commands(page.read_text(encoding="utf-8")):
        try:
            parse_command_line(argv)
        except (typer.TyperException, AssertionError) as exc:  # click's UsageError is a TyperException
            pytest.fail(f"{page.relative_to(DOCS)}: `{line}` does not parse: {exc}")


@pytest.mark.parametrize("stage", STAGE_PAGES)
def test_each_stage_page_shows_real_commands(stage: str) -> None:
    page = DOCS / "stages" / f"{stage}.md"
    assert documented_commands(page.read_text(encoding="utf-8")), f"{page.name} documents no command"


def test_the_docs_cover_the_main_commands() -> None:
    used = {argv[0] for page in PAGES for _, argv in documented_commands(page.read_text(encoding="utf-8"))}
    assert used >= {"run", "status", "log", "report", "diff", "gate", "traj"}, used


def test_the_checker_finds_and_rejects_rotten_commands() -> None:
    sample = "\n".join(
        [
            "```bash",
            "harnessevolve run -H h -b shell-basics \\",
            "  --candidates 2",
            "$ harnessevolve status -H h --no-such-flag",
            "harnessevolve report RUN ...",
            "```",
            "```yaml",
            "harnessevolve gate --bogus",
            "```",
            "```text",
            "harnessevolve: add a demonstration (a commit subject, not a command)",
            "```",
        ]
    )
    found = documented_commands(sample)
    assert [argv for _, argv in found] == [
        ["run", "-H", "h", "-b", "shell-basics", "--candidates", "2"],
        ["status", "-H", "h", "--no-such-flag"],
    ]
    assert parse_command_line(found[0][1]).params["candidates"] == 2
    with pytest.raises(typer.TyperException, match="No such option"):
        parse_command_line(found[1][1])
