"""The docs' diagrams: inline SVG drawn by the docs build, in step with the code."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

from tests.acceptance.docs_hooks import build_one_page, load_hook

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).parents[2]
HOOK = ROOT / "docs" / "_hooks" / "diagrams.py"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def diagrams() -> ModuleType:
    """The hook module, loaded from its file as mkdocs loads it."""
    return load_hook("diagrams")


def test_the_layers_diagram_is_the_import_linter_contract(diagrams: ModuleType) -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = (c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    drawn = [line for layer in diagrams.LAYERS for line in layer.contract]
    assert drawn == contract["layers"]  # every layer, in the contract's order
    svg = ET.fromstring(diagrams.layers())
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert "_transport, _budget" in texts
    assert "sync, _push, _sync" in texts


@pytest.mark.parametrize("name", ["layers", "budget-hour", "fleet"])
def test_each_diagram_is_an_accessible_svg(diagrams: ModuleType, name: str) -> None:
    svg = ET.fromstring(diagrams.DIAGRAMS[name]())
    assert svg.get("role") == "img"
    assert svg.get("aria-labelledby") == f"{name}-title {name}-desc"
    title = svg.find(f"{SVG}title")
    assert title is not None
    assert title.get("id") == f"{name}-title"
    assert len(svg.findtext(f"{SVG}desc") or "") > 200  # says in words what it shows


def test_the_pages_readers_need_them_on_have_them() -> None:
    for page, name in [
        ("project/architecture.md", "layers"),
        ("guide/budget.md", "budget-hour"),
        ("operations/fleets.md", "fleet"),
    ]:
        assert f"\n<!-- diagram: {name} -->\n" in (ROOT / "docs" / page).read_text("utf-8")


def build(tmp_path: Path, page: str) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of a one-page site using the diagrams hook."""
    return build_one_page(tmp_path, page, "diagrams")


def test_the_hook_puts_the_svg_into_the_built_site(tmp_path: Path) -> None:
    done = build(tmp_path, "# Fleet\n\n<!-- diagram: fleet -->\n")
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert '<figure class="diagram">\n<svg ' in html
    assert '<title id="fleet-title">A fleet on PostgreSQL</title>' in html


def test_an_unknown_diagram_fails_the_build(tmp_path: Path) -> None:
    done = build(tmp_path, "# Fleet\n\n<!-- diagram: fleets -->\n")
    assert done.returncode != 0
    assert "index.md: no diagram 'fleets' (known: layers, budget-hour, fleet)" in done.stderr
