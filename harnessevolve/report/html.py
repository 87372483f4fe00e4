"""One self-contained HTML file for a run: no script, no external URL; CSS and SVG inline.

Everything that comes from the run (summaries, diffs, reasons, task ids) is escaped by jinja2's
autoescape; only the SVG chart, built from escaped parts, is marked safe.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnessevolve import __version__
from harnessevolve.core.files import atomic_write_text
from harnessevolve.report.conversations import anchor_for, conversation_groups, conversation_views
from harnessevolve.report.final_text import beats_line, interval_text
from harnessevolve.report.firing import firings
from harnessevolve.report.run_model import CandidateView, RunView
from harnessevolve.report.runs import format_duration
from harnessevolve.report.svg_chart import PALETTE, Series, line_chart
from harnessevolve.report.task_matrix import failure_groups, task_matrix

TEMPLATE = "report.html.j2"
TOP_CLUSTERS = 10


@dataclass(frozen=True)
class ClusterRow:
    cause: str
    total: int
    cells: tuple[tuple[int, float, float], ...]
    """Per generation: (size, severity, shade 0..1)."""


def score_series(view: RunView) -> list[Series]:
    gens = view.generations
    validation = [(0.0, view.baseline_validation)] if view.baseline_validation is not None else []
    validation += [(float(g.generation), g.validation) for g in gens if g.validation is not None]
    series = [
        Series(
            "train batch (current)",
            tuple((float(g.generation), g.train_current) for g in gens if g.train_current is not None),
            PALETTE[0],
        ),
        Series(
            "train batch (candidate)",
            tuple((float(g.generation), g.train_candidate) for g in gens if g.train_candidate is not None),
            PALETTE[4],
            line=False,
        ),
        Series("validation", tuple(validation), PALETTE[2]),
    ]
    if view.tests:
        last = view.tests[-1]
        points = []
        if "seed" in last.scores:
            points.append((0.0, last.scores["seed"]))
        if "evolved" in last.scores:
            points.append((float(max(view.generation, 1)), last.scores["evolved"]))
        series.append(Series("test (seed -> evolved)", tuple(points), PALETTE[3], dashed=True))
    return [s for s in series if s.points]


def cluster_rows(view: RunView) -> list[ClusterRow]:
    """The largest error clusters (by total size over the run), their size in each generation."""
    totals: dict[str, int] = {}
    for g in view.generations:
        for c in g.clusters:
            totals[c.cause] = totals.get(c.cause, 0) + c.size
    top = sorted(totals, key=lambda cause: (-totals[cause], cause))[:TOP_CLUSTERS]
    biggest = max((c.size for g in view.generations for c in g.clusters), default=1) or 1
    rows = []
    for cause in top:
        cells = []
        for g in view.generations:
            match = next((c for c in g.clusters if c.cause == cause), None)
            size, severity = (match.size, match.severity) if match else (0, 0.0)
            cells.append((size, severity, round(size / biggest, 3)))
        rows.append(ClusterRow(cause, totals[cause], tuple(cells)))
    return rows


def diff_lines(candidate: CandidateView) -> list[tuple[str, str]]:
    """(css class, line) for the candidate's diff: add, del, hunk, meta or ctx."""
    out = []
    for line in candidate.diff.splitlines():
        if line.startswith(("+++", "---", "diff --git", "index ", "new file", "deleted file")):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        out.append((kind, line))
    return out


def format_number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value) if isinstance(value, int | str) else json.dumps(value, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def render_html(view: RunView, link_base: str | None = None) -> str:
    """The report; ``link_base`` is how its links reach the run folder (relative to where the file
    is written; default: the run folder's absolute ``file://`` address)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harnessevolve.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = format_number
    env.filters["score"] = lambda v: "-" if v is None else f"{v:.3f}"
    env.filters["money"] = lambda v: "-" if v is None else f"${v:,.4f}"
    env.filters["ci"] = interval_text
    generated = datetime.now(UTC)
    chart = line_chart(score_series(view), title="Scores per generation") if view.generations else None
    stages = sorted(view.usage)
    matrix = task_matrix(view.root, list(view.events))
    conversations = conversation_views(Path(view.root), matrix)
    return env.get_template(TEMPLATE).render(
        view=view,
        version=__version__,
        generated=generated.isoformat(timespec="seconds"),
        elapsed=format_duration(view.elapsed_seconds(generated)),
        chart=chart,
        clusters=cluster_rows(view),
        diff_lines=diff_lines,
        stages=stages,
        usage_by_generation=[g for g in view.generations if g.usage],
        event_counts=_event_counts(view),
        multi={
            g
            for g in {c.generation for c in view.candidates}
            if sum(c.generation == g for c in view.candidates) > 1
        },
        anchors={c.sha: c.anchor for c in view.candidates if c.sha},
        tasks=matrix,
        conversations=conversations,
        conversation_groups=conversation_groups(conversations),
        conversation_anchor=anchor_for,
        failure_groups=failure_groups,
        beats_line=beats_line,
        firing={f.sha: f for f in firings(view.events)},
        run_link=(link_base if link_base is not None else Path(view.root).resolve().as_uri()).rstrip("/"),
    )


def _event_counts(view: RunView) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for record in view.events:
        name = record.event_name
        counts[name] = counts.get(name, 0) + 1
    return sorted(counts.items())


def write_html_report(view: RunView, out: Path) -> Path:
    """Write the report to ``out`` (a file, or a folder that gets ``report.html``); returns the file."""
    target = out / "report.html" if out.is_dir() else out
    link_base = os.path.relpath(Path(view.root).resolve(), target.resolve().parent)
    atomic_write_text(target, render_html(view, link_base=Path(link_base).as_posix()))
    mask = os.umask(0)
    os.umask(mask)
    target.chmod(0o666 & ~mask)  # a report is for sharing: the usual file mode, not the temp file's 0600
    return target
