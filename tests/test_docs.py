"""Every `harnessevolve ...` command line in the docs' ```bash and ```text blocks is accepted by the
real command-line parser (options, types, ranges), so documented commands cannot rot."""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import subprocess
import sys
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


# --- Blocks that show a command's output --------------------------------------------------------
#
# A ```text block of README.md or docs/**/*.md that starts with `$ COMMAND` and shows what the
# command printed is one of two kinds, said by an HTML comment on the line before its fence:
#
#   <!-- tested: SCENARIO -->     run here, with the scripted model, by SCENARIOS[SCENARIO]: each
#                                 `$ ` line in a scratch folder, its output compared with the lines
#                                 under it once volatile parts are normalised (`normalised`)
#   <!-- illustrative: WHY -->    not run: WHY says what it came from (a real local model, a long
#                                 measurement, a kill -9 at one moment, ...)
#
# The convention is written up in docs/README.md ("Examples in these pages"). To refresh a tested
# block after a deliberate change in the output: HARNESSEVOLVE_DOCS_REWRITE=1 and run this file.

ROOT = DOCS.parent
OUTPUT_PAGES = [ROOT / "README.md", *PAGES]
OUTPUT_LANGUAGES = ("text", "")
MARKER = re.compile(r"<!--\s*(illustrative|tested):\s*(.*?)\s*-->")
REWRITE_ENV = "HARNESSEVOLVE_DOCS_REWRITE"
INIT_H = "harnessevolve init h"


def compare_plans(folder: Path, markdown: str) -> str:
    """docs/compare-command.md's set-up: its plan (the page's first ```yaml block) as plan.yaml, the
    two bad plans and the other model's plan its errors come from; a shell command that makes the
    folders its first blocks find (compare-out with one finished cell; other, by the other model)."""
    plan = re.search(r"```yaml\n(version: 1\n.*?)```", markdown, re.DOTALL).group(1)  # type: ignore[union-attr]
    (folder / "plan.yaml").write_text(plan, encoding="utf-8")
    (folder / "bad-plan.yaml").write_text(plan.replace("matched_to: evolve", "k: 0"), encoding="utf-8")
    gepa = "arms:\n  - name: evolve\n    kind: evolve\n  - {kind: gepa, matched_to: evolve}\n"
    (folder / "gepa-plan.yaml").write_text(plan[: plan.index("arms:")] + gepa, encoding="utf-8")
    other = plan.replace("scripted/policy:learner", "scripted/policy:gives_up").replace("[0, 1, 2]", "[3]")
    (folder / "other-plan.yaml").write_text(
        other[: other.index("arms:")] + "arms:\n  - kind: seed\n", encoding="utf-8"
    )
    return (
        "harnessevolve compare run plan.yaml --out compare-out --cells arm=seed,seed=0"
        " && harnessevolve compare run other-plan.yaml --out other"
    )


SCENARIOS: dict[str, tuple[str, str, str]] = {
    # name: (the page, the folder its outputs show for the scratch folder the commands run in,
    #        a set-up command run there first, {repo} the checkout, {plans} compare_plans'; its
    #        output is not compared)
    "getting-started": ("docs/getting-started.md", "/tmp/gs", ""),
    "readme-run": ("README.md", "/tmp", ""),
    "adapters": ("docs/adapters.md", "/tmp", f"{INIT_H} && ln -s {{repo}}/benchmarks benchmarks"),
    "optimize": ("docs/stages/optimize.md", "/tmp", INIT_H),
    "pipeline": ("docs/stages/pipeline.md", "/tmp", INIT_H),
    "execute": ("docs/stages/execute.md", "/tmp", INIT_H),
    "compare-command": ("docs/compare-command.md", "/tmp", "{plans}"),
    "nl2bash": ("docs/adapters.md", "/tmp", ""),
}
NEEDS = {"nl2bash": "icalfa"}
"""A scenario that needs an optional extra's module is skipped without it (nl2bash: the nl2bash extra)."""
"""Each scenario runs its page's `tested` blocks in page order, in one scratch folder."""


def output_blocks(markdown: str) -> list[tuple[int, str | None, str, str]]:
    """(line number, the marker's kind or None, its text, the block's body) for each block that
    starts with `$ ` and shows output (a line that is not a command)."""
    found = []
    for match in FENCE.finditer(markdown):
        language, body = match.group(1), match.group(2)
        lines = body.splitlines()
        if language not in OUTPUT_LANGUAGES or not body.startswith("$ "):
            continue
        if all(line.startswith("$ ") for line in lines):
            continue  # commands only: nothing shown to go stale
        before = markdown[: match.start()].rstrip().rsplit("\n", 1)[-1]
        marker = MARKER.fullmatch(before.strip())
        line = markdown[: match.start()].count("\n") + 1
        found.append((line, marker.group(1) if marker else None, marker.group(2) if marker else "", body))
    return found


def test_every_block_showing_output_is_tested_or_marked_illustrative() -> None:
    unmarked, unknown = [], []
    for page in OUTPUT_PAGES:
        for line, kind, text, _ in output_blocks(page.read_text(encoding="utf-8")):
            where = f"{page.relative_to(ROOT)}:{line}"
            if kind is None or (kind == "illustrative" and not text):
                unmarked.append(where)
            elif kind == "tested" and SCENARIOS.get(text, ("",))[0] != str(page.relative_to(ROOT)):
                unknown.append(f"{where} ({text})")
    assert not unmarked, (
        f"blocks with output and no <!-- tested: ... --> / <!-- illustrative: why -->: {unmarked}"
    )
    assert not unknown, f"tested blocks no scenario of this page runs: {unknown}"


RUN_ID = re.compile(r"\b\d{8}-\d{6}(?:-\d{3})?-[0-9a-f]{4}\b")
VOLATILE = [
    (RUN_ID, "RUN-ID"),
    (re.compile(r"\b[0-9a-f]{7,40}\b"), "HASH"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "DATE"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}\b"), "TIME"),
    (re.compile(r"\b(?:\d+h ?)?(?:\d+m ?)?\d+(?:\.\d+)? ?s\b"), "DURATION"),
    (re.compile(r"load average [\d.]+(?:[-–, ]+[\d.]+)*"), "load average LOAD"),
    (re.compile(r"\b\d+(?:\.\d+)? min\b"), "DURATION"),
]


def normalised(text: str) -> str:
    """Output with what changes from run to run replaced (run ids, commit hashes, dates, times,
    durations, load averages), trailing spaces dropped; a rich table whose column holds a hash keeps
    its width, since both sides have hashes of the same length."""
    for pattern, placeholder in VOLATILE:
        text = pattern.sub(placeholder, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def commands_and_outputs(body: str) -> list[tuple[str, str]]:
    """Each `$ COMMAND` of a block with the lines under it."""
    pairs: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        else:
            pairs[-1][1].append(line)
    return [(command, "\n".join(lines)) for command, lines in pairs]


def run_shown(command: str, folder: Path, home: str, *, rewrite: bool = True) -> str:
    """What `command` prints (stdout and stderr in the order written) in `folder`, which the page
    shows as `home` (``rewrite``: the page's `home/` paths in the command point into `folder`; a
    scenario's own set-up, which names the checkout, is run as written: a checkout under /tmp
    would otherwise be pointed into the scratch folder)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_INTERACTIVE", "COLUMNS")}
    env |= {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
    }
    env |= {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HARNESSEVOLVE_PROGRESS_EVERY_S": "86400",
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        ["bash", "-c", command.replace(f"{home}/", f"{folder}/") if rewrite else command],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        check=False,
    )
    return done.stdout.replace(str(folder), home)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_tested_blocks_print_what_the_page_shows(scenario: str, tmp_path: Path) -> None:
    page_name, home, setup = SCENARIOS[scenario]
    if scenario in NEEDS and importlib.util.find_spec(NEEDS[scenario]) is None:
        pytest.skip(f"needs {NEEDS[scenario]}")
    page = ROOT / page_name
    markdown = page.read_text(encoding="utf-8")
    blocks = [
        body for _, kind, text, body in output_blocks(markdown) if kind == "tested" and text == scenario
    ]
    assert blocks, f"{page_name} has no block marked <!-- tested: {scenario} -->"
    if setup:
        plans = compare_plans(tmp_path, markdown) if "{plans}" in setup else ""
        run_shown(setup.format(repo=ROOT, plans=plans), tmp_path, home, rewrite=False)
    rewritten = markdown
    for body in blocks:
        new_body = []
        for command, shown in commands_and_outputs(body):
            printed = run_shown(command, tmp_path, home)
            new_body += [f"$ {command}", printed.rstrip("\n")] if printed.strip() else [f"$ {command}"]
            if not os.environ.get(REWRITE_ENV):
                assert normalised(printed) == normalised(shown), (
                    f"{page_name}: `$ {command}` printed:\n{printed}"
                )
        rewritten = rewritten.replace(body, "\n".join(new_body) + "\n", 1)
    if os.environ.get(REWRITE_ENV):
        page.write_text(rewritten, encoding="utf-8")


def test_normalising_keeps_what_matters() -> None:
    one = (
        "run 20261206-220322-697-56fc: 3cf84b24 at 22:03:26, 3.9s ago, elapsed 37m 10s; load average 1.1-1.3"
    )
    two = "run 20261130-073452-d07a: 817d4948 at 08:12:03, 1.6s ago, elapsed 2m 1s; load average 0.4"
    assert normalised(one) == normalised(two)
    assert normalised("test 0.062 (1/16 tasks)") != normalised("test 0.125 (2/16 tasks)")
    assert commands_and_outputs("$ a\nout\n$ b\n") == [("a", "out"), ("b", "")]
    marked = "<!-- illustrative: a real model -->\n```text\n$ x\ny\n```\n"
    marked += "```text\n$ z\nw\n```\n```text\n$ only\n```\n"
    assert [(kind, text) for _, kind, text, _ in output_blocks(marked)] == [
        ("illustrative", "a real model"),
        (None, ""),
    ]


def test_the_report_page_lists_the_html_reports_sections_in_order() -> None:
    template = (ROOT / "harnessevolve" / "report" / "templates" / "report.html.j2").read_text(
        encoding="utf-8"
    )
    headings = [
        re.sub(r"<[^>]+>|\{[^}]*\}", "", h).strip() for h in re.findall(r"<h2[^>]*>(.*?)</h2>", template)
    ]
    page = (DOCS / "stages" / "report.md").read_text(encoding="utf-8")
    listed = page[page.index("Its sections") :]
    places = [listed.find(f"**{heading}**") for heading in headings]
    assert -1 not in places, [h for h, at in zip(headings, places, strict=True) if at == -1]
    assert places == sorted(places), headings


def test_every_environment_variable_the_package_reads_is_documented() -> None:
    package = ROOT / "harnessevolve"
    used = {
        name for f in package.rglob("*.py") for name in re.findall(r"HARNESSEVOLVE_[A-Z0-9_]+", f.read_text())
    }
    docs = "\n".join(page.read_text(encoding="utf-8") for page in OUTPUT_PAGES)
    assert used, "no HARNESSEVOLVE_* variable found: the pattern is wrong"
    missing = sorted(name for name in used if name not in docs)
    assert not missing, f"HARNESSEVOLVE_* variables no page names: {missing}"


def python_sessions(markdown: str) -> list[tuple[int, str]]:
    """(line number, body) of each ```python block written as an interpreter session (`>>> `)."""
    return [
        (markdown[: m.start()].count("\n") + 1, m.group(2))
        for m in FENCE.finditer(markdown)
        if m.group(1) == "python" and m.group(2).lstrip().startswith(">>> ")
    ]


@pytest.mark.parametrize("page", OUTPUT_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_interpreter_sessions_print_what_the_page_shows(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ```python block of `>>> ` lines is run as a doctest, in a scratch folder."""
    sessions = python_sessions(page.read_text(encoding="utf-8"))
    if any("nl2bash" in body for _, body in sessions) and importlib.util.find_spec("icalfa") is None:
        pytest.skip("needs icalfa (the nl2bash extra)")
    monkeypatch.chdir(tmp_path)
    for line, body in sessions:
        name = f"{page.relative_to(ROOT)}:{line}"
        test = doctest.DocTestParser().get_doctest(body, {}, name, str(page), line)
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        report: list[str] = []
        runner.run(test, out=report.append)
        assert not runner.failures, "".join(report)
