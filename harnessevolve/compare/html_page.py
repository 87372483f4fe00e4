"""The comparison as one self-contained HTML page: the table, and two inline-SVG plots (no script,
no network): each arm's test score per seed with its mean, and each arm's paired difference against
the seed arm with its confidence interval. Written by ``compare run --html`` and ``compare merge
--html``."""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup, escape

from harnessevolve.compare.table import CONFIDENCE, Gain, Row, Table, gain_text, row_cells
from harnessevolve.core.files import atomic_write_text

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2")
ROW_H = 30
LEFT = 230
PLOT_W = 520
RIGHT = 30

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #1f2937; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #d1d5db; padding: 4px 8px; text-align: left; }
th { background: #f3f4f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.loss { color: #b91c1c; } .win { color: #15803d; } .muted { color: #6b7280; }
svg text { font: 12px system-ui, sans-serif; fill: #374151; }
"""


def _x(value: float, lo: float, hi: float) -> float:
    return LEFT + (value - lo) / (hi - lo) * PLOT_W


def _axis(lo: float, hi: float, height: float, label: str, step: float) -> list[str]:
    parts = []
    tick = lo
    while tick <= hi + 1e-9:
        x = _x(tick, lo, hi)
        parts.append(f'<line x1="{x:.1f}" y1="10" x2="{x:.1f}" y2="{height - 36:.1f}" stroke="#e5e7eb"/>')
        parts.append(f'<text x="{x:.1f}" y="{height - 20:.1f}" text-anchor="middle">{tick:g}</text>')
        tick += step
    parts.append(
        f'<text x="{LEFT + PLOT_W / 2:.1f}" y="{height - 4:.1f}" text-anchor="middle">{escape(label)}</text>'
    )
    return parts


def scores_plot(table: Table) -> Markup:
    """Per arm (one line each): a dot per seed and a bar at the mean, on 0 to 100 points."""
    height = 10 + ROW_H * len(table.rows) + 46
    parts = _axis(0, 100, height, "test score (points)", 20)
    for i, row in enumerate(table.rows):
        y = 10 + ROW_H * i + ROW_H / 2
        color = PALETTE[i % len(PALETTE)]
        parts.append(f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{escape(row.label)}</text>')
        for seed, score in row.scores().items():
            parts.append(
                f'<circle cx="{_x(score, 0, 100):.1f}" cy="{y:.1f}" r="5" fill="{color}" fill-opacity="0.55">'
                f"<title>{escape(row.label)}, seed {seed}: {score:.1f}</title></circle>"
            )
        mx = _x(row.mean, 0, 100)
        parts.append(
            f'<line x1="{mx:.1f}" y1="{y - 10:.1f}" x2="{mx:.1f}" y2="{y + 10:.1f}" stroke="{color}" '
            f'stroke-width="3"><title>{escape(row.label)}: mean {row.mean:.1f}</title></line>'
        )
    return _svg(parts, height, "Test score per seed (dots) and mean (bar)")


def gains_plot(table: Table) -> Markup:
    """Per arm with a paired difference against the seed arm: the difference and its interval."""
    rows = [r for r in table.rows if r.vs_seed is not None]
    if not rows:
        return Markup("")
    gains = [r.vs_seed for r in rows if r.vs_seed is not None]
    ends = [v for g in gains for v in ((g.ci or (g.points, g.points)) + (g.points,))]
    lo, hi = min(-10.0, *ends), max(10.0, *ends)
    step = 10.0 if hi - lo <= 120 else 20.0
    lo, hi = step * (lo // step), step * -(-hi // step)
    height = 10 + ROW_H * len(rows) + 46
    parts = _axis(lo, hi, height, "difference against the seed arm (points)", step)
    zero = _x(0, lo, hi)
    parts.append(f'<line x1="{zero:.1f}" y1="10" x2="{zero:.1f}" y2="{height - 36}" stroke="#6b7280"/>')
    for i, row in enumerate(rows):
        gain = row.vs_seed
        assert gain is not None
        y = 10 + ROW_H * i + ROW_H / 2
        color = (
            "#15803d"
            if gain.ci and gain.ci[0] > 0
            else "#b91c1c"
            if gain.ci and gain.ci[1] < 0
            else "#6b7280"
        )
        parts.append(f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{escape(row.label)}</text>')
        if gain.ci:
            x0, x1 = _x(gain.ci[0], lo, hi), _x(gain.ci[1], lo, hi)
            parts.append(
                f'<line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" '
                f'stroke="{color}" stroke-width="3"/>'
            )
        parts.append(
            f'<circle cx="{_x(gain.points, lo, hi):.1f}" cy="{y:.1f}" r="5" fill="{color}">'
            f"<title>{escape(gain_text(gain))}</title></circle>"
        )
    return _svg(parts, height, f"Paired difference against the seed arm, {CONFIDENCE:.0%} interval")


def _color(gain: Gain) -> str:
    """Green when the interval is above zero, red when below, grey when it reaches zero."""
    if gain.ci and gain.ci[0] > 0:
        return "#15803d"
    if gain.ci and gain.ci[1] < 0:
        return "#b91c1c"
    return "#6b7280"


def _svg(parts: list[str], height: float, title: str) -> Markup:
    width = LEFT + PLOT_W + RIGHT
    body = "".join(parts)
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0f}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>{body}</svg>'
    )


def _css(gain: Gain | None) -> str:
    if gain is None or not gain.ci:
        return ""
    return ' class="win"' if gain.ci[0] > 0 else ' class="loss"' if gain.ci[1] < 0 else ""


def _row(row: Row) -> Markup:
    label, mean, seeds, vs_seed, vs_sc, rollouts, cost = (escape(c) for c in row_cells(row))
    return Markup(
        f"<tr><td>{label}</td><td class=num>{mean}</td><td>{seeds}</td>"
        f"<td{_css(row.vs_seed)}>{vs_seed}</td><td{_css(row.vs_sc)}>{vs_sc}</td>"
        f"<td class=num>{rollouts}</td><td class=num>{cost}</td></tr>"
    )


def render(table: Table, *, title: str = "harnessevolve compare") -> str:
    """The page's HTML."""
    bench = table.benchmark
    seeds = ", ".join(map(str, table.seeds))
    what = (
        f"{bench.get('name', '?')} ({bench.get('test_tasks', '?')} test tasks, "
        f"sha {bench.get('test_sha', '?')}); agent model {table.model.get('name', '?')}; "
        f"seeds {seeds}; {table.cells} cells"
    )
    rows = Markup("").join(_row(r) for r in table.rows)
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1><p>{escape(what)}.</p>"
        '<p class="muted">Test score in points (percent of test tasks), mean ± sd over seeds; differences '
        f"paired per (seed, task) with a {CONFIDENCE:.0%} bootstrap interval over tasks; "
        "W/L: pairs won/lost; rollouts and cost: means over seeds of what made each arm's harness "
        "(cost: every model call of the cell).</p>"
        "<table><thead><tr><th>arm</th><th>test (mean ± sd)</th><th>per seed</th><th>vs seed</th>"
        f"<th>vs best-of-k (sc)</th><th>rollouts</th><th>cost</th></tr></thead><tbody>{rows}</tbody></table>"
        f"<h2>Test score per seed</h2>{scores_plot(table)}"
        f"<h2>Against the seed harness</h2>{gains_plot(table)}"
        "</body></html>\n"
    )


def write_page(path: Path, table: Table) -> Path:
    """The page at ``path``, atomically."""
    atomic_write_text(path, render(table))
    return path
