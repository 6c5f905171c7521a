"""The API reference: each public name is on its page under a concept, and each model's
fields are tabled with a line each (the hook that renders them refuses gaps)."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import attrs
import pytest

from invoicing_async import errors, models
from tests.acceptance.docs_hooks import load_hook
from tests.unit.test_exports import PUBLIC_MODULES

ROOT = Path(__file__).parents[2]
REFERENCE = ROOT / "docs" / "reference"
# Pages that render a whole module (a flat list is its concept: the exceptions, the source).
WHOLE = {"invoicing_async.errors", "invoicing_async.contrib.dlt", "invoicing_async.contrib.pandas"}


def hook() -> ModuleType:
    return load_hook("model_fields")


def shown() -> set[str]:
    text = "\n".join(page.read_text(encoding="utf-8") for page in REFERENCE.glob("*.md"))
    return set(re.findall(r"^::: ([\w.]+)$", text, re.M))


@pytest.mark.parametrize("module", sorted(set(PUBLIC_MODULES) - {"invoicing_async.contrib"}))
def test_every_public_name_is_on_a_reference_page(module: str) -> None:
    objects = shown()
    if module in WHOLE:
        assert module in objects
        return
    names = set(importlib.import_module(module).__all__) - {"__version__"}
    if module == "invoicing_async":  # the exceptions, re-exported: on the errors page
        names -= set(errors.__all__)
    missing = sorted(n for n in names if f"{module}.{n}" not in objects)
    assert missing == []


def test_every_model_field_has_a_line() -> None:
    fields = hook()
    lines = fields.load_lines()
    text = (REFERENCE / "models.md").read_text(encoding="utf-8")
    tabled = re.findall(r"^<!-- fields: (\w+) -->$", text, re.M)
    attrs_models = sorted(n for n in models.__all__ if attrs.has(getattr(models, n)))
    assert sorted(tabled) == sorted(n for n in attrs_models if n != "Model")
    for name in tabled:
        table = fields.field_table(name, lines)
        rows = table.splitlines()[2:]
        assert len(rows) == len(attrs.fields(getattr(models, name)))
        assert all(row.startswith("| `") and not row.endswith("|  |") for row in rows)
    assert "| `total_price_incl_tax` | `Decimal | None` |" in fields.field_table("Invoice", lines)
    # An apostrophe typed as an escaped quote (`contact\"s`) shows as `contact"s`.
    quoted = [f"{m}.{f}" for m, table in lines.items() for f, line in table.items() if '"' in line]
    assert quoted == []


def test_a_field_without_a_line_fails_the_build() -> None:
    fields = hook()
    lines = fields.load_lines()
    del lines["SyncEntry"]["revision"]
    lines["SyncEntry"]["gone"] = "a field no model has"
    with pytest.raises(
        fields.PluginError, match=r"no line for \['revision'\], no field \['gone'\]"
    ):
        fields.field_table("SyncEntry", lines)
