"""mkdocs hook: benchmark tables and charts generated from benchmarks/results/latest.json.

A page writes `<!-- bench: PREFIX -->` (several prefixes separated by ` | `) where a table
belongs, `<!-- bench-chart: PREFIX ; title=TITLE -->` where a chart (an inline SVG) does,
and `<!-- bench-run -->` for the line saying when the run was made; the
rendering is `benchmarks.report.render_markers`. A marker that names no result fails the
build, so figures in the docs are never typed by hand and never silently missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from benchmarks.report import MissingResultError, load, render_markers

_RESULTS = Path("benchmarks") / "results" / "latest.json"


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace the page's benchmark markers with tables and charts from the results file."""
    del files  # part of the hook's signature
    if "<!-- bench" not in markdown:
        return markdown
    results: dict[str, Any] = load(Path(config.config_file_path).parent / _RESULTS)
    try:
        return render_markers(markdown, results)
    except (MissingResultError, ValueError) as exc:
        raise PluginError(f"{page.file.src_uri}: {exc} in {_RESULTS}") from exc
