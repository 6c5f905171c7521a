"""mkdocs hook: a table of each model's fields (name, type, one line) in the API reference.

A page writes `<!-- fields: Invoice -->` where the table of `invoicing_async.models.Invoice`
belongs. Names and types come from the model itself; the lines from `model_fields.toml`
beside this file. A field without a line, or a line for no field, fails the build, so the
table is complete whatever fields the models gain.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import attrs
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from invoicing_async import models

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

LINES = Path(__file__).with_name("model_fields.toml")
_MARKER = re.compile(r"^<!-- fields: (?P<name>\w+) -->$", re.M)


def load_lines() -> dict[str, dict[str, str]]:
    """Each model's field lines, from `model_fields.toml`."""
    loaded: dict[str, dict[str, str]] = tomllib.loads(LINES.read_text(encoding="utf-8"))
    return loaded


def field_table(name: str, lines: dict[str, dict[str, str]]) -> str:
    """The markdown table of `models.<name>`'s fields, in declaration order."""
    cls = getattr(models, name, None)
    if cls is None or not attrs.has(cls):
        raise PluginError(f"fields: {name} is no model of invoicing_async.models")
    described = lines.get(name, {})
    fields = attrs.fields(cls)
    missing = [f.name for f in fields if f.name not in described]
    stale = sorted(set(described) - {f.name for f in fields})
    if missing or stale:
        raise PluginError(
            f"{LINES.name} [{name}]: no line for {missing or 'none'}, no field {stale or 'none'}"
        )
    rows = [
        f"| `{f.name}` | `{_type_text(f.type)}` | {described[f.name]} |"
        for f in fields
        if not f.name.startswith("_")
    ]
    return "\n".join(["| Field | Type | Description |", "| --- | --- | --- |", *rows])


def _type_text(annotation: Any) -> str:
    """`Decimal | None`, `list[InvoiceDetail]`: the annotation without module paths."""
    if isinstance(annotation, type) and not hasattr(annotation, "__origin__"):
        text = annotation.__name__
    else:
        text = annotation if isinstance(annotation, str) else str(annotation)
    # In a code span, `|` separates no cells (Python-Markdown's tables): left as written.
    return re.sub(r"\b(?:[a-z_]\w*\.)+([A-Za-z_]\w*)", r"\1", text)


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace the page's field markers with the models' field tables."""
    del page, config, files  # part of the hook's signature
    if "<!-- fields: " not in markdown:
        return markdown
    lines = load_lines()
    return _MARKER.sub(lambda match: field_table(match["name"], lines), markdown)
