"""The HTML report shows each kept trajectory as a conversation, grouped by task and linked from the
task matrix, with the first divergence marked; every failure says why (failed checks, the judge's
reason, the stop reason, how a conversation ended), in the matrix and in its conversation; revisions
are named by commit; a failures-only filter works without a script of the report's own. Checked in a
real browser."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from reasons_run import JUDGE_REASON, USER_END, make_reasons_run
from scripted_run import copy_run, ledger_events, write_events

from harnessevolve.cli.app import app
from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.conversation import conversation, transcript_text
from harnessevolve.report.conversations import anchor_for
from harnessevolve.report.final_text import beats_line
from harnessevolve.report.final_text import interval_text as ci_text
from harnessevolve.report.run_view import load_run_view
from harnessevolve.report.task_matrix import task_matrix

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SECOND_TURN = "Now add as many pears as there are apples in my cart."


@pytest.fixture(scope="module")
def multi_turn_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tool-use-example's train tasks (two scripted turns; one stateful tool) and a task driven by a
    simulated user and scored by a judge: one generation of ``scripted/policy:gives_up``."""
    root = tmp_path_factory.mktemp("conv")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("XDG_CACHE_HOME", str(root / "cache"))  # the judge's replies are cached there
        return make_reasons_run(root)


def test_report_html_shows_the_user_turns_of_a_multi_turn_run(
    multi_turn_run: Path, tmp_path: Path, cli
) -> None:
    out = tmp_path / "r.html"
    result = cli.invoke(app, ["report", "-H", str(multi_turn_run), "--html", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert 'id="conversations"' in page
    assert html.escape(SECOND_TURN, quote=False) in page or SECOND_TURN in page
    assert 'href="#conv-' in page  # the task matrix links to the conversation


def report_page(harness: Path, out: Path, cli) -> str:
    result = cli.invoke(app, ["report", "-H", str(harness), "--html", str(out)])
    assert result.exit_code == 0, result.output
    return out.read_text()


def only_run(harness: Path) -> Path:
    (run_dir,) = (harness / ".harnessevolve" / "runs").iterdir()
    return run_dir


def section(page: str, start: str, end: str) -> str:
    return page[page.index(start) : page.index(end, page.index(start))]


def test_every_failure_says_why_in_the_task_matrix_and_its_conversation(
    multi_turn_run: Path, tmp_path: Path, cli
) -> None:
    page = html.unescape(report_page(multi_turn_run, tmp_path / "r.html", cli))
    matrix = task_matrix(only_run(multi_turn_run), list(load_run_view(only_run(multi_turn_run)).events))
    failing = [row for row in matrix.rows if any(c is not None and not c.passed for c in row.cells)]
    assert failing and page.count('<tr class="why-row">') == len(failing)
    chat = section(page, 'id="why-cart-chat"', "</details>")
    judge_line = f"judge scripted/report-judge: does not hold ({JUDGE_REASON})"
    assert f"<th>judge</th><td>{judge_line}</td>" in chat
    assert "<th>check</th>" not in chat  # a judge check's message is shown once, as the judge's
    assert "<th>stopped</th><td>submitted (the agent submitted an answer)</td>" in chat
    assert f"<th>conversation</th><td>the simulated user ended it ({USER_END}) after 2 user turns" in chat
    total = section(page, 'id="why-cart-total"', "</details>")
    assert "<th>check</th><td>answer: expected number '6.25', found 'I do not know'</td>" in total
    assert "<small>stopped: submitted</small>" in section(page, 'id="task-matrix"', "</table>")
    # the same reasons open the failed conversation
    seed = matrix.revisions[0]
    conv = section(page, f'id="{anchor_for(seed.harness_hash, "cart-chat")}"', "</details>")
    assert 'data-outcome="fail"' in conv and judge_line in conv and "stopped: submitted" in conv
    assert f"the simulated user ended it ({USER_END})" in conv


def test_revisions_are_named_by_their_commits(multi_turn_run: Path, tmp_path: Path, cli) -> None:
    run_dir = only_run(multi_turn_run)
    events = [json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines()]
    seed_rev = next(e["rev"] for e in events if e["event"] == "baseline")
    committed = [e["sha"] for e in events if e["event"] == "candidate_committed"]
    matrix = task_matrix(run_dir, list(load_run_view(run_dir).events))
    assert [r.commit for r in matrix.revisions] == [seed_rev, *committed]
    page = report_page(multi_turn_run, tmp_path / "r.html", cli)
    heads = re.findall(r'class="(?:sha )?revision-commit"[^>]*>([^<]+)<', page)
    assert heads == [seed_rev[:8], *(sha[:8] for sha in committed)]
    for r in matrix.revisions:  # the content hash is only a hover title
        assert f">{r.harness_hash[:8]}<" not in page and f"harness content {r.harness_hash}" in page
    conversations = section(page, 'id="conversations"', "</section>")
    assert f'<span class="sha">{seed_rev[:8]}</span>' in conversations


def test_conversations_are_grouped_by_task(multi_turn_run: Path, tmp_path: Path, cli) -> None:
    page = report_page(multi_turn_run, tmp_path / "r.html", cli)
    groups = re.findall(r'<div class="conv-task" data-failed="(\d+)"><h3><code>([^<]+)</code>', page)
    tasks = [task for _, task in groups]
    assert tasks == sorted(set(tasks)) and {"cart-chat", "cart-two-turns"} <= set(tasks)
    conversations = section(page, 'id="conversations"', "</section>")
    assert len(re.findall(r'<details class="conversation"', conversations)) == page.count('href="#conv-')
    assert 'type="checkbox" id="failures-only"' in page and "<script" not in page


def test_the_test_split_table_shows_the_terminals_confidence_intervals(
    multi_turn_run: Path, tmp_path: Path, cli
) -> None:
    run_dir = copy_run(only_run(multi_turn_run), tmp_path)
    events = ledger_events(run_dir)
    revs = {"seed": next(e["rev"] for e in events if e["event"] == "baseline"), "evolved": "b" * 40}
    control = {"k": 4, "sc": 0.25, "oracle": 0.5, "sc_ci": [0.05, 0.45], "oracle_ci": [0.2, 0.8]}
    control |= {"matched_to": 32, "tasks": 8, "evolved_minus_sc": 0.25, "evolved_minus_sc_ci": [0.0, 0.5]}
    control |= {"confidence": 0.95}
    test = {"v": events[-1]["v"], "ts": events[-1]["ts"], "event": "test_evaluated", "tasks": 8}
    test |= {"revisions": revs, "scores": {"seed": 0.25, "evolved": 0.5}, "control": control}
    test |= {"intervals": {"seed": [0.0, 0.5625], "evolved": [0.125, 0.875]}}
    write_events(run_dir, [*events, test])
    out = tmp_path / "final.html"
    result = cli.invoke(app, ["report", str(run_dir), "--html", str(out)])
    assert result.exit_code == 0, result.output
    table = section(out.read_text(), '<table class="test-scores">', "</table>")
    assert "<th>95% CI</th>" in table
    for ci in ([0.0, 0.5625], [0.125, 0.875], [0.05, 0.45], [0.2, 0.8]):
        assert f'<td class="num ci">{ci_text(ci)}</td>' in table  # as report --final prints it
    assert ci_text([0.0, 0.5625]) == "0.000 - 0.562"
    said = "evolved - control (sc): +25.0 points (95% CI +0.0 to +50.0): not shown to beat the control"
    assert beats_line(control).startswith(said) and beats_line(control) in table
    assert "beats the control" not in beats_line(control)  # one verdict: the interval reaches 0


PROBE = """<script>
const all = [...document.querySelectorAll("details.conversation")];
const tasks = [...document.querySelectorAll(".conv-task")];
const shown = (xs) => xs.filter((x) => x.getClientRects().length > 0).length;
const before = [shown(all), shown(tasks)];
document.getElementById("failures-only").checked = true;
document.body.dataset.probe = [...before, shown(all), shown(tasks)].join("/");
</script></body>"""


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_chromium_renders_the_conversations(multi_turn_run: Path, tmp_path: Path, cli) -> None:
    out = tmp_path / "r.html"
    page = report_page(multi_turn_run, out, cli)
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", out.as_uri()]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('class="conversation"') >= 2
    assert SECOND_TURN in dom.stdout and 'class="turn user"' in dom.stdout
    rendered = html.unescape(dom.stdout)
    assert JUDGE_REASON in rendered and f"the simulated user ended it ({USER_END})" in rendered
    assert '<tr class="why-row">' in rendered and "stopped: submitted" in rendered
    assert rendered.count('class="conv-task"') >= 3 and 'id="failures-only"' in rendered

    # the failures-only filter is CSS: a probe (in a copy; the report has no script) ticks it
    passed = len(re.findall(r'<details class="conversation"[^>]*data-outcome="pass"', page))
    failed = len(re.findall(r'<details class="conversation"[^>]*data-outcome="fail"', page))
    groups = page.count('<div class="conv-task"')
    failing_groups = groups - page.count('<div class="conv-task" data-failed="0"')
    assert failing_groups < groups, "say-hello passes in every revision"
    assert failed and passed, "the run has both (cart-chat fails, say-hello passes)"
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", PROBE))
    dom = subprocess.run([*command[:-1], probe.as_uri()], capture_output=True, text=True, timeout=90)
    found = re.search(r'data-probe="([\d/]+)"', dom.stdout)
    assert found, dom.stdout[-2000:]
    assert found.group(1) == f"{passed + failed}/{groups}/{failed}/{failing_groups}"


def test_conversation_entries_cut_long_results_and_skip_the_system_prompt() -> None:
    steps = (
        Step(1, "system", "PROMPT"),
        Step(2, "user", "hi"),
        Step(
            3,
            "agent",
            "looking",
            (ToolCall("c", "bash", {"command": "ls"}),),
            (ObservationResult("c", "x" * 50),),
        ),
    )
    entries = conversation(Trajectory("s", "a", "1", "m", steps), observation_limit=10)
    assert [e.kind for e in entries] == ["user", "agent", "call", "observation"]
    assert entries[2].text == 'bash({"command": "ls"})'
    assert entries[3].text == "x" * 10 and entries[3].cut == 40
    assert "PROMPT" not in transcript_text(Trajectory("s", "a", "1", "m", steps))
