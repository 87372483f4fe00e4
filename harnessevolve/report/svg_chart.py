"""A small inline-SVG line chart: scores per generation, with native hover titles and no script.

Inline SVG rather than plotly: the report stays a few tens of kilobytes instead of carrying 4.6 MB of
plotly.js, renders where scripts are blocked (CI artifact viewers, mail), and needs no dependency.
"""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup, escape

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2")


MARKERS = ("circle", "square", "triangle", "diamond", "cross")
DASHES = ("", ' stroke-dasharray="2 3"', ' stroke-dasharray="8 3"', ' stroke-dasharray="1 4"')
SERIES_SHIFT = 4.0
"""Pixels between the x positions of consecutive series (so equal values do not hide each other)."""


def _marker(shape: str, x: float, y: float, color: str, title: str) -> str:
    r = 4.5
    if shape == "square":
        box = f'x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r}" height="{2 * r}"'
        return f'<rect {box} fill="{color}">{title}</rect>'
    if shape == "triangle":
        points = f"{x:.1f},{y - r - 1:.1f} {x - r - 1:.1f},{y + r:.1f} {x + r + 1:.1f},{y + r:.1f}"
        return f'<polygon points="{points}" fill="{color}">{title}</polygon>'
    if shape == "diamond":
        points = (
            f"{x:.1f},{y - r - 1:.1f} {x + r + 1:.1f},{y:.1f} {x:.1f},{y + r + 1:.1f} {x - r - 1:.1f},{y:.1f}"
        )
        return f'<polygon points="{points}" fill="none" stroke="{color}" stroke-width="2">{title}</polygon>'
    if shape == "cross":
        x0, y0, x1, y1 = x - r, y - r, x + r, y + r
        d = f"M{x0:.1f},{y0:.1f}L{x1:.1f},{y1:.1f}M{x0:.1f},{y1:.1f}L{x1:.1f},{y0:.1f}"
        return f'<path d="{d}" stroke="{color}" stroke-width="2.5">{title}</path>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{color}">{title}</circle>'


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float], ...]
    color: str = PALETTE[0]
    line: bool = True
    """``False`` draws markers only (e.g. a candidate's score that did not become current)."""
    dashed: bool = False


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    step = (high - low) / count if high > low else 1.0
    return [round(low + i * step, 6) for i in range(count + 1)]


def line_chart(
    series: list[Series],
    *,
    title: str,
    x_label: str = "generation",
    y_label: str = "score",
    width: int = 900,
    height: int = 320,
    y_range: tuple[float, float] | None = (0.0, 1.0),
) -> Markup:
    """An ``<svg>`` element: one polyline (and markers) per series, axes, ticks and a legend."""
    left, right, top, bottom = 56, 210, 28, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [x for s in series for x, _ in s.points] or [0.0, 1.0]
    ys = [y for s in series for _, y in s.points] or [0.0, 1.0]
    x_lo, x_hi = min(xs), max(max(xs), min(xs) + 1)
    y_lo, y_hi = (
        y_range if y_range and min(ys) >= y_range[0] and max(ys) <= y_range[1] else (min(ys), max(ys))
    )
    if y_hi <= y_lo:
        y_lo, y_hi = y_lo - 0.5, y_hi + 0.5

    def px(x: float) -> float:
        return left + (x - x_lo) / (x_hi - x_lo) * plot_w

    def py(y: float) -> float:
        return top + plot_h - (y - y_lo) / (y_hi - y_lo) * plot_h

    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#d4d4d8"/>',
    ]
    for tick in _ticks(y_lo, y_hi):
        y = py(tick)
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e7"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{tick:.2f}</text>')
    x_step = max(1, round((x_hi - x_lo) / 12))
    for tick in range(int(x_lo), int(x_hi) + 1, x_step):
        x = px(tick)
        parts.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" class="tick">{tick}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" class="axis">'
        f"{escape(x_label)}</text>"
    )
    parts.append(
        f'<text x="14" y="{top + plot_h / 2:.1f}" text-anchor="middle" class="axis" '
        f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">{escape(y_label)}</text>'
    )
    for i, s in enumerate(series):
        # Series that coincide (a train score equal to the validation one, a flat 0.0) stay visible:
        # each is shifted a few pixels sideways and has its own marker shape and dash pattern.
        shift = (i - (len(series) - 1) / 2) * SERIES_SHIFT
        coords = [(px(x) + shift, py(y)) for x, y in s.points]
        name = escape(s.name)
        shape = MARKERS[i % len(MARKERS)]
        parts.append(f'<g class="series" data-series="{name}" data-marker="{shape}">')
        dash = ' stroke-dasharray="6 4"' if s.dashed else DASHES[i % len(DASHES)]
        if s.line and len(coords) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="2"{dash}/>')
        for (x, y), (gx, gy) in zip(coords, s.points, strict=True):
            label = f"<title>{name}, {escape(x_label)} {gx:g}: {gy:.3f}</title>"
            parts.append(_marker(shape, x, y, s.color, label))
        parts.append("</g>")
        ly = top + 10 + i * 20
        lx = left + plot_w + 14
        parts.append(
            f'<line x1="{lx}" x2="{lx + 22}" y1="{ly}" y2="{ly}" stroke="{s.color}" stroke-width="3"{dash}/>'
            + _marker(shape, lx + 11, ly, s.color, "")
            + f'<text x="{lx + 28}" y="{ly + 4}" class="legend">{name}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
