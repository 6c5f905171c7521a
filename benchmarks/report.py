"""Markdown tables of benchmark results, for `benchmarks.run` and the documentation site.

The docs never carry typed figures: a page holds `<!-- bench: PREFIX -->` on a line of its
own, and the site's hook (docs/_hooks/bench_tables.py) calls `render_markers`, which puts
in the table of the results in `benchmarks/results/latest.json` whose names start with
PREFIX. Several prefixes go in one table separated by ` | `; a prefix that matches no
result is an error, so a renamed benchmark cannot leave a page silently empty.
`<!-- bench-chart: PREFIX | PREFIX ; title=TITLE ; baseline=LABEL -->` puts in the chart of
those results (`benchmarks.charts`; `baseline` is optional and names what ours is compared
with, by default what each result's note says).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.charts import bar_chart, figure

LATEST = Path(__file__).parent / "results" / "latest.json"
# Markers stand on lines of their own, so one quoted in running text is left alone.
MARKER = re.compile(r"^<!--\s*bench:\s*(?P<prefixes>.+?)\s*-->$", re.M)
CHART_MARKER = re.compile(r"^<!--\s*bench-chart:\s*(?P<spec>.+?)\s*-->$", re.M)
RUN_MARKER = re.compile(r"^<!--\s*bench-run\s*-->$", re.M)

Row = Mapping[str, Any]


class MissingResultError(LookupError):
    """A marker names results that the results file does not hold."""


def load(path: Path = LATEST) -> dict[str, Any]:
    """The results file as written by `benchmarks.run.record`."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def markdown_table(rows: Sequence[Row], *, notes: bool = False) -> str:
    """One line per result: ours, the bound or baseline, the ratio, the target and whether
    it is met; `notes` adds each result's note as a last column."""
    header = "| benchmark | ours | baseline | ratio | target | met |"
    rule = "|---|--:|--:|--:|:-:|:-:|"
    if notes:
        header, rule = header + " note |", rule + "---|"
    lines = [header, rule]
    for row in rows:
        ours, baseline = _figures(row)
        line = (
            f"| {_cell(row['name'])} | {ours} | {baseline} | {row['ratio']:.3g} "
            f"| {_target(row)} | {_met(row)} |"
        )
        lines.append(line + (f" {_cell(row.get('note', ''))} |" if notes else ""))
    return "\n".join(lines)


def select(results: Sequence[Row], prefixes: Sequence[str]) -> list[Row]:
    """The results whose names start with any of `prefixes`, in the file's order; each
    prefix must match at least one."""
    for prefix in prefixes:
        if not any(r["name"].startswith(prefix) for r in results):
            raise MissingResultError(f"no benchmark result whose name starts with {prefix!r}")
    return [r for r in results if r["name"].startswith(tuple(prefixes))]


def render_markers(markdown: str, data: Mapping[str, Any]) -> str:
    """`markdown` with each `<!-- bench: … -->` replaced by its table and each
    `<!-- bench-run -->` by a line saying where and how long the run was."""

    def table(match: re.Match[str]) -> str:
        prefixes = [p.strip() for p in match["prefixes"].split(" | ")]
        rows = markdown_table(select(data["results"], prefixes), notes=True)
        # The class lets docs/stylesheets/extra.css keep figures on one line.
        return f'<div class="bench-table" markdown="1">\n\n{rows}\n\n</div>'

    charts = 0

    def chart(match: re.Match[str]) -> str:
        nonlocal charts
        charts += 1
        prefixes, *options = (part.strip() for part in match["spec"].split(" ; "))
        settings = dict(option.partition("=")[::2] for option in options)
        if "title" not in settings or not set(settings) <= {"title", "baseline"}:
            raise ValueError(f"a chart marker takes title= and baseline=: {match[0]}")
        rows = select(data["results"], [p.strip() for p in prefixes.split(" | ")])
        svg = bar_chart(
            rows,
            title=settings["title"],
            chart_id=f"bench-chart-{charts}",
            baseline=settings.get("baseline", ""),
        )
        return f'<figure class="bench-figure">\n{svg}\n</figure>'

    run = f"Measured with Python {data['python']} on {data['machine']} ({data['seconds']:g} s)."
    return RUN_MARKER.sub(run, CHART_MARKER.sub(chart, MARKER.sub(table, markdown)))


def _figures(row: Row) -> tuple[str, str]:
    return figure(row["ours"], row["unit"]), figure(row["baseline"], row["unit"], like=row["ours"])


def _target(row: Row) -> str:
    if row["informational"]:
        return "–"
    return f"{'≥' if row['higher_is_better'] else '≤'} {row['target']:g}"


def _met(row: Row) -> str:
    if row["informational"]:
        return "n/a"
    return "yes" if row["met"] else "**no**"


def _cell(text: str) -> str:
    """Text safe inside a table cell."""
    return text.replace("|", "\\|").replace("\n", " ")
