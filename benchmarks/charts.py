"""SVG bar charts of benchmark results, drawn at docs build time from the results file.

A page writes `<!-- bench-chart: PREFIX | PREFIX ; baseline=LABEL -->` on a line of its
own (`benchmarks.report.render_markers` handles it beside the tables). Each result is a
pair of bars, ours and its baseline or bound, on the result's own scale, with its target
drawn in as a dashed line where ours must stay (below it, or above it when higher is
better). The figures are written into the SVG's text, its `<desc>` and `data-` attributes,
so that tests/acceptance/test_bench_charts.py can check them against the results file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

Row = Mapping[str, Any]

WIDTH = 720
_BAR = 15  # height of one bar
_ROW = 66  # label, two bars and the gap to the next result
_TOP = 58  # title and legend
_BARS_X = 8
_BARS_WIDTH = 430  # the rest of the width holds each bar's value
_EM = 7.0  # the width of a character of the figures' text, about
# Colours for a chart seen outside the site; docs/stylesheets/extra.css sets the theme's.
_OURS, _BASE = "#3f51b5", "#9e9e9e"
_TARGET = 'stroke="#d32f2f" stroke-width="2" stroke-dasharray="4 3"'
_BASELINE_IN_NOTE = re.compile(r"\(baseline:? ([^,;()]+)")
# A time whose value reads better in a smaller unit: seconds under 1 become ms, and so on.
_SMALLER = {"s": ("ms", 1e3), "ms": ("µs", 1e3)}


def figure(value: float, unit: str, *, like: float | None = None) -> str:
    """`value` in `unit` for a reader: 0.0172 s is "17.19 ms", 11576.9 is "11,577";
    `like` picks the unit by another value, so that both figures of a result share one."""
    scale = 1.0
    if unit in _SMALLER and abs(value if like is None else like) < 1:
        unit, scale = _SMALLER[unit]
    value *= scale
    # Thousands in full ("11,577"), never "1.158e+04".
    return f"{value:,.0f} {unit}" if abs(value) >= 1000 else f"{value:.4g} {unit}"


def baseline_label(row: Row, default: str) -> str:
    """What a result was compared with: `default` (the page's), else the note's
    "(baseline X", else "baseline"."""
    if default:
        return default
    found = _BASELINE_IN_NOTE.search(str(row.get("note", "")))
    if not found:
        return "baseline"
    words = found[1].split()  # "an expat handler keeping only …" is "an expat handler"
    return " ".join(words if len(found[1]) <= 24 else words[:3])


def target_text(row: Row) -> str:
    """The target as a reader says it: "≤ 0.5 × baseline"; empty for a reported row."""
    if row["informational"] or not row["target"]:
        return ""
    return f"{'≥' if row['higher_is_better'] else '≤'} {row['target']:g} × baseline"


def bar_chart(rows: Sequence[Row], *, title: str, chart_id: str, baseline: str = "") -> str:
    """An accessible SVG (role img, `<title>`, `<desc>` listing every figure) of `rows`:
    ours against the baseline, one scale per result, the target as a dashed line."""
    if not rows:
        raise ValueError("a chart needs at least one result")
    height = _TOP + _ROW * len(rows)
    summary = "; ".join(_summary(row, baseline_label(row, baseline)) for row in rows)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="bench-chart" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'aria-labelledby="{chart_id}-title {chart_id}-desc" font-size="13" fill="currentColor">',
        f'<title id="{chart_id}-title">{escape(title)}</title>',
        f'<desc id="{chart_id}-desc">Each result has its own scale. {escape(summary)}.</desc>',
        f'<text class="bench-chart__title" x="0" y="18">{escape(title)}</text>',
        *_legend(),
    ]
    for index, row in enumerate(rows):
        parts.extend(_result(row, baseline_label(row, baseline), _TOP + _ROW * index))
    parts.append("</svg>")
    return "".join(parts)


def _legend() -> list[str]:
    y = 32
    return [
        f'<g class="bench-chart__legend" aria-hidden="true">'
        f'<rect class="bench-chart__ours" fill="{_OURS}" x="0" y="{y}" width="14" height="10"/>'
        f'<text x="20" y="{y + 9}">ours</text>'
        f'<rect class="bench-chart__baseline" fill="{_BASE}" x="70" y="{y}" '
        f'width="14" height="10"/>'
        f'<text x="90" y="{y + 9}">baseline or bound</text>'
        f'<line class="bench-chart__target" {_TARGET} '
        f'x1="230" y1="{y - 2}" x2="230" y2="{y + 12}"/>'
        f'<text x="238" y="{y + 9}">target: where ours must end</text></g>',
    ]


def _result(row: Row, label: str, top: int) -> list[str]:
    ours, base = float(row["ours"]), float(row["baseline"])
    bound = base * float(row["target"]) if target_text(row) else None
    scale = max(ours, base, bound or 0.0) or 1.0

    def length(value: float) -> float:
        return round(_BARS_WIDTH * max(value, 0.0) / scale, 1)

    def value_x(value: float, text: str) -> float:
        """Where a bar's figure starts: after the bar, and after the target line when
        the figure would cross it."""
        start = _BARS_X + length(value) + 6
        if bound is not None and start - 6 < _BARS_X + length(bound) < start + _EM * len(text):
            start = _BARS_X + length(bound) + 6
        return start

    ours_text = f"ours {figure(ours, row['unit'])}" + (
        "" if row["informational"] or row["met"] else " (target missed)"
    )
    base_text = f"{label} {figure(base, row['unit'], like=ours)}"
    heading = row["name"] + (f" (target {target_text(row)})" if target_text(row) else "")
    y_ours, y_base = top + 8, top + 8 + _BAR + 4
    parts = [
        f'<g class="bench-chart__result" data-name="{escape(row["name"])}" '
        f'data-ours="{row["ours"]!r}" data-baseline="{row["baseline"]!r}" '
        f'data-unit="{escape(row["unit"])}">',
        f'<text class="bench-chart__label" x="0" y="{top + 2}">{escape(heading)}</text>',
        *_target_line(
            None if bound is None else _BARS_X + length(bound), y_ours - 3, y_base + _BAR + 3
        ),
        f'<rect class="bench-chart__ours" fill="{_OURS}" x="{_BARS_X}" y="{y_ours}" '
        f'width="{length(ours)}" height="{_BAR}"/>',
        f'<text x="{value_x(ours, ours_text)}" y="{y_ours + 12}">{escape(ours_text)}</text>',
        f'<rect class="bench-chart__baseline" fill="{_BASE}" x="{_BARS_X}" y="{y_base}" '
        f'width="{length(base)}" height="{_BAR}"/>',
        f'<text x="{value_x(base, base_text)}" y="{y_base + 12}">{escape(base_text)}</text>',
    ]
    parts.append("</g>")
    return parts


def _target_line(x: float | None, top: int, bottom: int) -> list[str]:
    """The target, drawn under the bars' figures (their halo keeps them legible)."""
    if x is None:
        return []
    return [
        f'<line class="bench-chart__target" {_TARGET} x1="{x}" y1="{top}" x2="{x}" y2="{bottom}"/>'
    ]


def _summary(row: Row, label: str) -> str:
    text = (
        f"{row['name']}: ours {figure(row['ours'], row['unit'])}, "
        f"{label} {figure(row['baseline'], row['unit'], like=row['ours'])}, "
        f"ratio {row['ratio']:.3g}"
    )
    if target_text(row):
        text += f", target {target_text(row)}, {'met' if row['met'] else 'missed'}"
    return text
