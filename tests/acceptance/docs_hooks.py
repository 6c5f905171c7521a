"""The docs hooks as the tests use them: loaded from their files as mkdocs loads them, and
run by `mkdocs build --strict` on a one-page site."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

HOOKS = Path(__file__).parents[2] / "docs" / "_hooks"

__all__ = ["HOOKS", "build_one_page", "load_hook"]


def load_hook(name: str) -> ModuleType:
    """`docs/_hooks/{name}.py`, imported from its file (the hooks are not a package)."""
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", HOOKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def build_one_page(
    site: Path, page: str, hook: str, extensions: str = ""
) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` in `site` of one page, `page`, with the hook `hook` (and the
    markdown extensions `extensions`, as YAML)."""
    (site / "docs").mkdir()
    (site / "docs" / "index.md").write_text(page, encoding="utf-8")
    config = f"site_name: t\nhooks: [{HOOKS / f'{hook}.py'}]\n"
    if extensions:
        config += f"markdown_extensions: {extensions}\n"
    (site / "mkdocs.yml").write_text(config, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site / "site")],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
