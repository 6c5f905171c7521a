"""The package's layering, as import-linter contracts in pyproject.toml: each layer imports
only those below it, production code never imports the fake service, and no import cycle
runs between folders. `pytest` fails on a violation.

import-linter runs in process and builds the import graph once; the broken case checks the
same contracts on a copy of that graph with one import added (no copy of the package).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter.adapters.building import GraphBuilder
from importlinter.application.app_config import settings
from importlinter.application.use_cases import lint_imports
from importlinter.configuration import configure

ROOT = Path(__file__).parents[2]


class OnceBuilt(GraphBuilder):
    """Builds the graph on first use, then hands out copies, with `added` imports in them."""

    def __init__(self) -> None:
        self.graph: grimp.ImportGraph | None = None
        self.added: list[tuple[str, str]] = []

    def build(self, *args: Any, **kwargs: Any) -> grimp.ImportGraph:
        if self.graph is None:
            self.graph = super().build(*args, **kwargs)
        graph = copy.deepcopy(self.graph)
        for importer, imported in self.added:
            graph.add_import(importer=importer, imported=imported)
        return graph


@pytest.fixture(scope="module")
def builder() -> Iterator[OnceBuilt]:
    """import-linter configured as its command line does, building through `OnceBuilt`."""
    configure()
    once = OnceBuilt()
    settings.configure(GRAPH_BUILDER=once)
    yield once
    settings.configure(GRAPH_BUILDER=GraphBuilder())


def lint(builder: OnceBuilt, capsys: pytest.CaptureFixture[str]) -> tuple[bool, str]:
    """`lint-imports` in process: whether the contracts hold, and its report."""
    kept = lint_imports(str(ROOT / "pyproject.toml"), cache_dir=None, no_logo=True)
    return kept, capsys.readouterr().out


def test_the_package_keeps_its_contracts(
    builder: OnceBuilt, capsys: pytest.CaptureFixture[str]
) -> None:
    kept, out = lint(builder, capsys)
    assert kept, out
    assert "3 kept, 0 broken" in out


def test_an_import_running_up_breaks_the_layers(
    builder: OnceBuilt, capsys: pytest.CaptureFixture[str]
) -> None:
    """The contracts can fail: the wire format importing the CLI is caught."""
    builder.added = [("invoicing_async._wire", "invoicing_async._cli.progress")]
    try:
        kept, out = lint(builder, capsys)
    finally:
        builder.added = []
    assert not kept, out
    assert "invoicing_async._wire is not allowed to import invoicing_async._cli" in out
    assert "Layers: each layer imports only those below it BROKEN" in out
    assert "1 kept, 2 broken" in out  # and a cycle between folders: _cli imports _wire
