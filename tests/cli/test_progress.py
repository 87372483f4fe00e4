"""Progress a person can plan by: generation N of M, done/total, ETA, running tokens and cost, as
rich bars on a terminal and periodic plain lines in a pipe (``harnessevolve.cli.progress``); and
piped output that is never padded to a fake width."""

from __future__ import annotations

import io
import itertools
import re
import threading
from pathlib import Path

import git
import pytest
from rich.console import Console
from rich.table import Table
from run_args import run_args
from suite_files import answer_task, write_suite

from harnessevolve.cli import progress, terminal
from harnessevolve.cli.app import app
from harnessevolve.cli.progress import ProgressLines, heartbeat, progress_hooks, progress_lines
from harnessevolve.cli.terminal import TrimmedStream
from harnessevolve.models.usage import UsageMeter, usage_scope

LINE = re.compile(
    r"^(?:(?P<unit>\w+) (?P<n>\d+) of (?P<m>\d+): )?(?P<label>.+?): (?P<done>\d+)/(?P<total>\d+) rollouts, "
    r"(?P<elapsed>\d+:\d\d:\d\d) elapsed, ETA (?P<eta>\?|\d+:\d\d:\d\d)"
    r"(?:; (?P<stage>[\w ]+?) (?P<tokens>\d+) tokens \$(?P<cost>\d+\.\d{4}))?"
    r"(?:; total (?P<all_tokens>\d+) tokens \$\d+\.\d{4})?"
    r"(?:; run ETA (?P<run_eta>\d+:\d\d:\d\d))?$",
    re.M,
)


def lines_of(output: str) -> list[dict[str, str]]:
    return [m.groupdict() for m in LINE.finditer(output)]


@pytest.fixture
def every_rollout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped progress prints a line at every rollout (period 0) on a clock a minute on at each look."""
    ticks = itertools.count(0, 60)
    monkeypatch.setenv(progress.EVERY_ENV, "0")
    monkeypatch.setattr(progress, "_now", lambda: float(next(ticks)))


def test_lines_wait_for_the_period_and_end_with_the_last(capsys) -> None:
    now = [0.0]
    advance = progress_lines("score", 6, clock=lambda: now[0])
    for step in (5, 5, 25, 40, 1, 1):  # seconds each rollout took
        now[0] += step
        advance()
    assert capsys.readouterr().out.splitlines() == [
        "score: 3/6 rollouts, 0:00:35 elapsed, ETA 0:00:35",
        "score: 4/6 rollouts, 0:01:15 elapsed, ETA 0:00:37",
        "score: 6/6 rollouts, 0:01:17 elapsed, ETA 0:00:00",
    ]
    quick = progress_lines("quick", 3, clock=lambda: 0.0)
    for _ in range(3):
        quick()
    assert capsys.readouterr().out == ""


def test_the_period_is_injectable(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    advance = progress_lines("score", 3, clock=lambda: 0.0, every_s=0)
    for _ in range(3):
        advance()
    assert [line.split(",")[0] for line in capsys.readouterr().out.splitlines()] == [
        "score: 1/3 rollouts",
        "score: 2/3 rollouts",
        "score: 3/3 rollouts",
    ]
    monkeypatch.setenv(progress.EVERY_ENV, "120")
    assert ProgressLines().every_s == 120.0
    monkeypatch.setenv(progress.EVERY_ENV, "soon")
    assert ProgressLines().every_s == progress.LINE_EVERY_S


def test_lines_name_the_generation_its_eta_and_the_stage_spend(capsys) -> None:
    """Generation N of M before the stage; the stage's tokens and cost from the meter its scope
    records into, the command's total when other stages spent too; the run's ETA once a
    generation has ended (the mean pace of the ended ones, times what is left)."""
    now = [0.0]
    lines = ProgressLines(clock=lambda: now[0], every_s=0)
    meter = UsageMeter()
    meter.record(stage="baseline", proposer=None, model="m", prompt_tokens=50, cost_usd=0.5)
    lines.outer(1, 3)
    with usage_scope(meter, stage="execute"):
        advance = lines("gen 1: run current harness", 2)
    meter.record(
        stage="execute", proposer=None, model="m", prompt_tokens=90, completion_tokens=10, cost_usd=0.25
    )
    now[0] = 40
    advance()
    now[0] = 100
    lines.outer(2, 3)
    with usage_scope(meter, stage="execute"):
        advance = lines("gen 2: run current harness", 2)
    now[0] = 130
    advance()
    assert capsys.readouterr().out.splitlines() == [
        "generation 1 of 3: gen 1: run current harness: 1/2 rollouts, 0:00:40 elapsed, ETA 0:00:40; "
        "execute 100 tokens $0.2500; total 150 tokens $0.7500",
        "generation 2 of 3: gen 2: run current harness: 1/2 rollouts, 0:00:30 elapsed, ETA 0:00:30; "
        "execute 100 tokens $0.2500; total 150 tokens $0.7500; run ETA 0:02:50",
    ]


def test_lines_beat_while_a_slow_rollout_runs(capsys) -> None:
    """Rollouts of minutes each: the newest unfinished stage gets a line every period from the
    heartbeat's ticks, before any rollout ends; a finished stage and an older one get none."""
    now = [0.0]
    lines = ProgressLines(clock=lambda: now[0])
    lines("earlier", 2)()  # left unfinished (a batch cut by a stop): no heartbeat for it
    advance = lines("score", 2)
    for second in (10, 29, 31, 45, 62):
        now[0] = second
        lines.tick()
    now[0] = 70
    advance()  # 8 s after the last line: quiet
    now[0] = 75
    advance()  # the last, shown because a line was
    now[0] = 200
    lines.tick()  # finished: nothing more
    assert capsys.readouterr().out.splitlines() == [
        "score: 0/2 rollouts, 0:00:31 elapsed, ETA ?",
        "score: 0/2 rollouts, 0:01:02 elapsed, ETA ?",
        "score: 2/2 rollouts, 0:01:15 elapsed, ETA 0:00:00",
    ]


def test_heartbeat_ticks_until_its_block_ends() -> None:
    ticked = threading.Event()

    class Lines:
        def tick(self) -> None:
            ticked.set()

    with heartbeat(Lines(), every_s=0.01):  # type: ignore[arg-type]
        assert ticked.wait(30)
    ticked.clear()
    assert not ticked.wait(0.05)  # the thread is gone with the block


@pytest.mark.parametrize(
    ("env", "tty", "live"),
    [
        ({}, True, True),
        ({}, False, False),
        ({"TERM": "dumb"}, True, False),
        ({"FORCE_COLOR": "1"}, False, False),  # a CI log with colours forced: lines, not a bar
        ({"TTY_INTERACTIVE": "0"}, True, False),
        ({"TTY_INTERACTIVE": "1"}, False, True),
    ],
)
def test_live_bars_only_on_a_terminal_that_can_redraw_them(monkeypatch, env, tty, live) -> None:
    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    for name in ("TERM", "FORCE_COLOR", "TTY_INTERACTIVE", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(terminal, "console", Console(file=Stream()))
    assert progress.live_display() is live


def test_bars_on_a_terminal_show_the_generation_eta_and_spend(monkeypatch) -> None:
    """A terminal gets rich bars: the generation's own bar, each stage's done/total, ETA column,
    tokens and cost; the rendered display, read back, holds them."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    monkeypatch.setenv("TTY_INTERACTIVE", "1")
    screen = Console(file=out, width=200, force_terminal=True, force_interactive=True, color_system=None)
    meter = UsageMeter()
    with progress_hooks(console=screen) as hooks:
        hooks.on_outer(2, 5)
        assert hooks.on_progress is not None
        with usage_scope(meter, stage="execute"):
            advance = hooks.on_progress("gen 2: run current harness", 4)
        meter.record(stage="execute", proposer=None, model="m", prompt_tokens=1200, cost_usd=0.01)
        advance()
    shown = out.getvalue()
    assert "generation 2 of 5" in shown and "1/5" in shown
    assert "gen 2: run current harness" in shown and "1/4" in shown
    assert "ETA" in shown and "execute 1200 tokens $0.0100" in shown


def test_piped_console_lines_end_at_their_text() -> None:
    """Rich pads table cells to their column (to the console's width for a long cell): piped, every
    line ends at its text, also across writes that end in spaces."""
    sink = io.StringIO()
    console = Console(file=TrimmedStream(sink), width=240, soft_wrap=True, color_system=None)  # type: ignore[arg-type]
    grid = Table.grid(padding=(0, 2))
    grid.add_column()
    grid.add_column()
    grid.add_row("run", "x" * 300)
    grid.add_row("state", "finished")
    console.print(grid)
    stream = TrimmedStream(sink)
    stream.write("a   ")
    stream.write("b  ")
    stream.write("\n")
    lines = sink.getvalue().splitlines()
    assert lines[-1] == "a   b"
    assert lines and all(line == line.rstrip() for line in lines)
    assert any(line.rstrip().endswith("finished") for line in lines)


def test_run_report_final_and_status_in_a_pipe(harness_dir: Path, cli, learner, every_rollout) -> None:
    """`run` piped: generation N of M, done/total, ETA, the stage's tokens and cost, the run's
    ETA; `report --final` piped: the test split's lines with their tokens; `status` piped: no line
    padded."""
    result = cli.invoke(app, run_args(harness_dir, learner))
    assert result.exit_code == 0, result.output
    lines = lines_of(result.output)
    generations = [line for line in lines if line["unit"] == "generation"]
    assert {(line["n"], line["m"]) for line in generations} == {("1", "2"), ("2", "2")}
    executed = [line for line in generations if line["stage"] == "execute"]
    assert any(int(line["tokens"]) > 0 for line in executed)
    assert any(line["done"] == line["total"] for line in executed)
    assert any(line["eta"] != "?" for line in executed)
    assert any(line["run_eta"] for line in generations if line["n"] == "2")
    assert any(line["label"] == "validation: seed harness" and line["stage"] == "baseline" for line in lines)

    final = cli.invoke(app, ["report", "--harness", str(harness_dir), "--final", "--model", learner])
    assert final.exit_code == 0, final.output
    tested = [line for line in lines_of(final.output) if line["label"].startswith("test split: ")]
    assert tested and all(line["tokens"] is not None and line["stage"] == "test split" for line in tested)
    assert any(line["done"] == line["total"] for line in tested)

    status = cli.invoke(app, ["status", "--harness", str(harness_dir)])
    assert status.exit_code == 0, status.output
    shown = status.output.splitlines()
    assert any(line.startswith("generation") and "2 of 2" in line for line in shown)
    assert all(line == line.rstrip() for line in shown)


def test_gate_in_a_pipe(harness_dir: Path, cli, learner, every_rollout) -> None:
    """`gate` piped: baseline and candidate each get lines with done/total, ETA, tokens and cost
    (metered as the gate's), and no bar is drawn."""
    (harness_dir / "prompts" / "examples.md").write_text(
        "## Example\nTask: Read password.txt and tell me the word inside it.\n"
        'Step 1: call read_file {"path": "password.txt"}\nResult: falcon\n'
        'Step 2: call submit {"answer": "falcon"}\n'
    )
    repo = git.Repo(harness_dir)
    base = repo.head.commit.hexsha
    repo.git.add("-A")
    repo.git.commit("-qm", "add a demonstration")
    args = ["gate", "--harness", str(harness_dir), "--benchmark", "shell-basics", "--model", learner]
    result = cli.invoke(app, [*args, "--baseline", base, "--candidate", "HEAD", "--batch-size", "8"])
    assert result.exit_code == 0, result.output
    lines = lines_of(result.output)
    assert len({line["label"] for line in lines}) >= 2  # baseline and candidate are scored apart
    assert lines and all(line["stage"] == "gate" for line in lines)
    assert any(int(line["tokens"]) > 0 for line in lines)
    assert any(line["done"] == line["total"] and line["eta"] == "0:00:00" for line in lines)
    assert not re.search(r"━ +\d+/\d+ \d+:\d\d:\d\d", result.output)  # no bar


def test_refs_import_in_a_pipe(cli, tmp_path: Path, every_rollout) -> None:
    gold = [{"tool": "submit", "arguments": {"answer": "hi"}}]
    suite = write_suite(
        tmp_path / "suite",
        "progress-probe",
        answer_task("one", "Answer hi.", "hi", gold=gold),
        answer_task("two", "Answer hi.", "hi", gold=gold),
    )
    out = tmp_path / "refs"
    result = cli.invoke(app, ["refs", "import", "-b", str(suite), "--split", "all", "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = lines_of(result.output)  # (a heartbeat may add a line while a replay runs)
    assert {line["label"] for line in lines} == {"refs import: replay gold solutions"}
    assert {("1", "2"), ("2", "2")} <= {(line["done"], line["total"]) for line in lines}
    assert (
        lines[-1]["eta"] == "0:00:00"
        and lines[-1]["stage"] == "refs import"
        and lines[-1]["tokens"] is not None
    )
