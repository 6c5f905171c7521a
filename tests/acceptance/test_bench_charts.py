"""Benchmark charts of the docs: SVG drawn from the results file, never by hand."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from benchmarks.charts import figure
from benchmarks.report import CHART_MARKER, MissingResultError, load, render_markers, select
from tests.acceptance.test_bench_tables import RESULTS, build

ROOT = Path(__file__).parents[2]
SVG = "{http://www.w3.org/2000/svg}"


def charts(rendered: str) -> list[ET.Element]:
    """The SVG elements of a rendered page, parsed (so each is well-formed XML)."""
    return [ET.fromstring(svg) for svg in re.findall(r"<svg .*?</svg>", rendered, re.S)]


def test_a_chart_marker_becomes_an_accessible_svg_of_the_results_it_names() -> None:
    page = "<!-- bench-chart: decode ; title=Decoding against xmltodict ; baseline=xmltodict -->"
    rendered = render_markers(page, RESULTS)
    assert rendered.startswith('<figure class="bench-figure">\n<svg ')
    (svg,) = charts(rendered)
    assert svg.get("role") == "img"
    assert svg.get("aria-labelledby") == "bench-chart-1-title bench-chart-1-desc"
    assert svg.findtext(f"{SVG}title") == "Decoding against xmltodict"
    desc = svg.findtext(f"{SVG}desc") or ""
    assert "decode xml: seconds per response: ours 30.2 ms, xmltodict 63.6 ms, ratio 0.475" in desc
    assert "target ≤ 0.5 × baseline, met" in desc
    results = svg.findall(f"{SVG}g[@class='bench-chart__result']")
    assert [g.get("data-name") for g in results] == [
        "decode xml: seconds per response",
        "decode json: seconds per response",
    ]
    assert [g.get("data-ours") for g in results] == ["0.0302", "0.0082"]
    texts = [t.text for t in results[0].iter(f"{SVG}text")]
    assert texts[1:] == ["ours 30.2 ms", "xmltodict 63.6 ms"]


def test_the_target_is_a_line_where_ours_must_end() -> None:
    (svg,) = charts(render_markers("<!-- bench-chart: decode xml ; title=t -->", RESULTS))
    (result,) = svg.findall(f"{SVG}g[@class='bench-chart__result']")
    ours, baseline = (float(r.get("width", "")) for r in result.iter(f"{SVG}rect"))
    (line,) = result.iter(f"{SVG}line")
    # The bound is 0.5 x 63.6 ms on a scale whose longest bar is the baseline.
    assert float(line.get("x1", "")) - 8 == pytest.approx(baseline * 0.5, abs=0.1)
    assert ours < baseline * 0.5


def test_a_missed_target_is_said_and_a_reported_row_has_no_target() -> None:
    page = "<!-- bench-chart: loop stall | freeing ; title=Stalls ; baseline=bound -->"
    (svg,) = charts(render_markers(page, RESULTS))
    missed, reported = svg.findall(f"{SVG}g[@class='bench-chart__result']")
    assert "ours 55 ms (target missed)" in [t.text for t in missed.iter(f"{SVG}text")]
    assert not list(reported.iter(f"{SVG}line"))
    assert "freeing the list: ours 40 ms, bound 1 ms, ratio 40." in (
        svg.findtext(f"{SVG}desc") or ""
    )


def test_the_baseline_is_named_by_the_results_note_unless_the_page_names_it() -> None:
    rows = [dict(RESULTS["results"][1], note="580184 bytes (baseline xmltodict.parse); x")]
    data = dict(RESULTS, results=rows)
    (svg,) = charts(render_markers("<!-- bench-chart: decode ; title=t -->", data))
    assert "xmltodict.parse 63.6 ms" in [t.text for t in svg.iter(f"{SVG}text")]


def test_a_chart_marker_naming_no_result_or_no_title_is_an_error() -> None:
    with pytest.raises(MissingResultError, match="'decode yaml'"):
        render_markers("<!-- bench-chart: decode | decode yaml ; title=t -->", RESULTS)
    with pytest.raises(ValueError, match="title="):
        render_markers("<!-- bench-chart: decode -->", RESULTS)
    with pytest.raises(ValueError, match="title="):
        render_markers("<!-- bench-chart: decode ; title=t ; colour=red -->", RESULTS)


def test_each_chart_in_the_docs_carries_the_figures_of_the_results_file() -> None:
    data = load(ROOT / "benchmarks" / "results" / "latest.json")
    by_name = {row["name"]: row for row in data["results"]}
    checked = 0
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        markers = CHART_MARKER.findall(text)
        rendered = render_markers(text, data)
        svgs = charts(rendered)
        assert len(svgs) == len(markers), page
        for marker, svg in zip(markers, svgs, strict=True):
            prefixes = [p.strip() for p in marker.split(" ; ")[0].split(" | ")]
            expected = [row["name"] for row in select(data["results"], prefixes)]
            results = svg.findall(f"{SVG}g[@class='bench-chart__result']")
            assert [g.get("data-name") for g in results] == expected, page
            for g in results:
                row = by_name[g.get("data-name", "")]
                assert float(g.get("data-ours", "")) == row["ours"]
                assert float(g.get("data-baseline", "")) == row["baseline"]
                texts = [t.text or "" for t in g.iter(f"{SVG}text")]
                assert texts[1].startswith(f"ours {figure(row['ours'], row['unit'])}")
                like = row["ours"]
                assert texts[2].endswith(figure(row["baseline"], row["unit"], like=like))
                checked += 1
    assert checked >= 20  # the benchmarks and per-call pages chart that many results


def test_the_hook_puts_charts_into_the_built_site(tmp_path: Path) -> None:
    done = build(tmp_path, "# Figures\n\n<!-- bench-chart: decode ; title=Decoding -->\n")
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert '<figure class="bench-figure">\n<svg ' in html
    assert 'data-name="decode xml: seconds per response" data-ours="0.0302"' in html


def test_the_hook_fails_the_build_for_a_chart_missing_a_result(tmp_path: Path) -> None:
    done = build(tmp_path, "# Figures\n\n<!-- bench-chart: jobs: ; title=Jobs -->\n")
    assert done.returncode != 0
    assert "index.md: no benchmark result whose name starts with 'jobs:'" in done.stderr
