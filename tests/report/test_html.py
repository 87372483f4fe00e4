"""The HTML report: one self-contained file, escaped, and what a real headless Chromium renders."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from scripted_run import copy_run, ledger_events, write_events
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.report.html import render_html
from harnessevolve.report.run_view import load_run_view
from harnessevolve.report.task_matrix import task_matrix

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def report_html(run_dir: Path, out: Path, *extra: str) -> Path:
    result = CliRunner().invoke(app, ["report", str(run_dir), "--html", str(out), *extra])
    assert result.exit_code == 0, result.output
    assert "HTML report:" in result.output
    return out / "report.html" if out.is_dir() else out


def test_report_is_one_self_contained_file(finished_run: Path, tmp_path: Path) -> None:
    html = report_html(finished_run, tmp_path / "r.html").read_text()
    view = load_run_view(finished_run)
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "an external URL"
    assert "@import" not in html and "url(" not in html
    assert html.count('<tr class="candidate-row">') == len(view.candidates) == 2
    assert '<svg class="chart"' in html and "<polyline" in html
    assert "+## Example" in html and "wins," in html and "premature_finish" in html  # the pooled verdict
    if "usage" in ledger_events(finished_run)[-1]:
        assert 'id="usage-table"' in html and "not recorded" not in html
    else:
        assert 'id="usage-not-recorded"' in html
    for c in view.candidates:
        assert c.summary in html and f'id="{c.anchor}"' in html
    assert len(html) < 200_000


def test_html_goes_into_an_existing_folder_as_report_html(finished_run: Path, tmp_path: Path) -> None:
    assert report_html(finished_run, tmp_path) == tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", "--harness", str(finished_run.parents[2]), "--json"])
    assert result.exit_code == 0 and '"state": "finished"' in result.output


def test_everything_from_the_run_is_escaped(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path)
    events = ledger_events(run)
    hostile = '<img src=x onerror="alert(1)"> & </pre>'
    for e in events:
        if e["event"] == "candidate_committed":
            e["summary"] = hostile
        if e["event"] == "batch_evaluated":
            e["clusters"][0]["cause"] = "<b>cause</b>"
    write_events(run, events)
    html = render_html(load_run_view(run))
    assert hostile not in html and "<b>cause</b>" not in html
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt; &amp; &lt;/pre&gt;" in html
    assert "&lt;b&gt;cause&lt;/b&gt;" in html


def test_a_run_with_no_generation_yet_still_renders(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path)
    write_events(run, ledger_events(run)[:1])
    html = render_html(load_run_view(run))
    assert "No generation has been evaluated yet" in html and "No candidate committed yet" in html
    assert 'id="usage-not-recorded"' in html and 'id="run-state">incomplete<' in html


def test_usage_per_stage_and_generation_from_the_ledger(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path)
    events = ledger_events(run)
    for e in events:
        e.pop("usage", None)
        if e["event"] == "generation_finished":
            e["usage"] = {"execute": {"tokens": 1000 * e["generation"], "cost_usd": 0.5}}
    write_events(run, events)
    html = render_html(load_run_view(run))
    table = html[html.index('id="usage-table"') :]
    assert re.search(r'<td>execute</td><td class="num">3,000</td><td class="num">\$1.0000</td>', table)
    assert "not recorded" not in html


def test_rejected_candidates_show_recorded_diffs(multi_candidate_run: Path, tmp_path: Path) -> None:
    html = report_html(multi_candidate_run, tmp_path / "k2.html").read_text()
    assert "diff from recorded changes" in html and "diff from git" in html


def test_the_task_matrix_names_revisions_by_commit(multi_candidate_run: Path, tmp_path: Path) -> None:
    events = ledger_events(multi_candidate_run)
    known = {e["rev"] for e in events if e["event"] == "baseline"}
    known |= {e["sha"] for e in events if e["event"] == "candidate_committed"}
    matrix = task_matrix(multi_candidate_run, list(load_run_view(multi_candidate_run).events))
    committed = [r for r in matrix.revisions if r.commit]
    assert committed and {r.commit for r in committed} <= known and matrix.revisions[0].commit in known
    html = report_html(multi_candidate_run, tmp_path / "k2.html").read_text()
    for r in matrix.revisions:  # a candidate never committed has no commit: its content hash, said so
        shown = r.commit[:8] if r.commit else f"content {r.harness_hash[:8]}"
        assert f'title="harness content {r.harness_hash}">{shown}<' in html
        assert r.commit or r.label == "uncommitted candidate"


def chromium(*args: str, timeout: int = 90) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_chromium_renders_plot_candidates_and_diffs(finished_run: Path, tmp_path: Path) -> None:
    from PIL import Image

    page = report_html(finished_run, tmp_path / "report.html")
    view = load_run_view(finished_run)
    dom = chromium("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = dom.stdout
    assert re.search(r"<svg[^>]*class=\"chart\"", rendered) and rendered.count("<polyline") >= 2
    # one marker per point, each series its own shape (circle, square, triangle, ...), titled
    points = re.findall(r"<(?:circle|rect|polygon|path)\b[^>]*><title>", rendered)
    assert len(points) >= 4 and rendered.count('class="series"') >= 2
    assert rendered.count('class="candidate-row"') == len(view.candidates)
    assert "+## Example" in rendered and 'class="add"' in rendered
    assert 'id="run-state">finished<' in rendered

    shot = tmp_path / "report.png"
    result = chromium(f"--screenshot={shot}", "--window-size=1200,1800", page.as_uri())
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    assert shot.stat().st_size > 20_000
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 1800)
    colors = image.getcolors(maxcolors=1_000_000)
    assert colors is not None and len(colors) > 200, "too few colours: a blank or broken page"
    most_common = max(count for count, _ in colors)
    assert most_common / (image.size[0] * image.size[1]) < 0.95
    # The chart's series colours are on screen: blue train line, green validation line.
    pixels = {rgb for _, rgb in colors}
    assert (0x25, 0x63, 0xEB) in pixels and (0x16, 0xA3, 0x4A) in pixels


def test_test_split_scores_and_a_pending_candidate(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path)
    events = ledger_events(run)
    test = {
        "v": 1,
        "ts": events[-1]["ts"],
        "event": "test_evaluated",
        "split": "test",
        "tasks": 16,
        "revisions": {"seed": events[0]["rev"], "evolved": events[-1]["rev"]},
        "scores": {"seed": 0.0625, "evolved": 0.4375},
        "model": "scripted/x",
    }
    write_events(run, events + [test])
    html = render_html(load_run_view(run))
    assert "test (seed -&gt; evolved)" in html and "0.438" in html and "test split (16 tasks" in html
    first = next(
        i for i, e in enumerate(events) if e["event"] in ("candidate_proposed", "candidate_committed")
    )
    write_events(run, events[: first + 1])
    html = render_html(load_run_view(run))
    assert '<span class="badge pending">pending</span>' in html and "No gate verdict recorded" in html
