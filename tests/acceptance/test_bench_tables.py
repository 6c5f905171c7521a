"""Benchmark tables of the docs: rendered from a results file, never typed by hand."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from benchmarks.report import MissingResultError, markdown_table, render_markers
from tests.acceptance.docs_hooks import build_one_page

ROOT = Path(__file__).parents[2]


def result(name: str, ours: float, baseline: float, unit: str, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": name,
        "ours": ours,
        "baseline": baseline,
        "unit": unit,
        "target": 1.0,
        "higher_is_better": False,
        "note": "",
        "informational": False,
        "ratio": round(ours / baseline, 4),
        "met": ours <= baseline,
    }
    row.update(extra)
    return row


RESULTS: dict[str, Any] = {
    "python": "3.11.7",
    "machine": "x86_64",
    "seconds": 12.5,
    "results": [
        result("requests, 0 changed of 10000", 1, 1, "requests", note="minimum 1"),
        result("decode xml: seconds per response", 0.0302, 0.0636, "s", target=0.5),
        result("decode json: seconds per response", 0.0082, 0.003, "s", target=6.0),
        result("loop stall, list()", 55.0, 50.0, "ms", met=False),
        result("freeing the list", 40.0, 1.0, "ms", informational=True, note="a | b"),
    ],
}


def test_a_marker_becomes_the_table_of_the_results_it_names() -> None:
    page = "# Decoding\n\n<!-- bench: decode -->\n\ntext\n"
    rendered = render_markers(page, RESULTS)
    lines = rendered.splitlines()
    # In a block the stylesheet lays out (docs/stylesheets/extra.css), figures right-aligned.
    assert lines[2:4] == ['<div class="bench-table" markdown="1">', ""]
    assert lines[4] == "| benchmark | ours | baseline | ratio | target | met | note |"
    assert lines[5] == "|---|--:|--:|--:|:-:|:-:|---|"
    assert lines[6] == (
        "| decode xml: seconds per response | 30.2 ms | 63.6 ms | 0.475 | ≤ 0.5 | yes |  |"
    )
    assert lines[7].startswith("| decode json: seconds per response | 8.2 ms | 3 ms | 2.73 | ≤ 6 |")
    assert lines[8:10] == ["", "</div>"]
    assert "requests" not in rendered
    assert lines[-1] == "text"


def test_several_prefixes_share_one_table_in_the_files_order() -> None:
    rendered = render_markers("<!-- bench: freeing | loop stall -->", RESULTS)
    names = [line.split(" | ")[0] for line in rendered.splitlines()[4:-2]]
    assert names == ["| loop stall, list()", "| freeing the list"]
    assert "| **no** |" in rendered  # a missed target stands out
    assert "| – | n/a | a \\| b |" in rendered  # informational: no target; pipes escaped


def test_a_marker_naming_no_result_is_an_error() -> None:
    with pytest.raises(MissingResultError, match="'decode yaml'"):
        render_markers("<!-- bench: decode | decode yaml -->", RESULTS)


def test_a_marker_quoted_in_running_text_is_left_alone() -> None:
    page = "Write `<!-- bench: PREFIX -->` where a table belongs.\n<!-- bench-run -->"
    assert render_markers(page, RESULTS) == (
        "Write `<!-- bench: PREFIX -->` where a table belongs.\n"
        "Measured with Python 3.11.7 on x86_64 (12.5 s)."
    )


def test_the_runner_prints_the_same_table() -> None:
    table = markdown_table(RESULTS["results"][:1])
    assert (
        table.splitlines()[2]
        == "| requests, 0 changed of 10000 | 1 requests | 1 requests | 1 | ≤ 1 | yes |"
    )


def build(tmp_path: Path, page: str) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of a one-page site using the docs' hook and RESULTS."""
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "latest.json").write_text(json.dumps(RESULTS))
    return build_one_page(tmp_path, page, "bench_tables", "[tables, md_in_html]")


def test_the_hook_puts_tables_into_the_built_site(tmp_path: Path) -> None:
    done = build(tmp_path, "# Figures\n\n<!-- bench: requests -->\n")
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert '<div class="bench-table">' in html
    assert "<td>requests, 0 changed of 10000</td>" in html


def test_the_hook_fails_the_build_for_a_missing_result(tmp_path: Path) -> None:
    done = build(tmp_path, "# Figures\n\n<!-- bench: jobs: -->\n")
    assert done.returncode != 0
    assert "index.md: no benchmark result whose name starts with 'jobs:'" in done.stderr
