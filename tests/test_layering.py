"""The package's layering, as import-linter contracts in pyproject.toml: each layer imports
only those below it, production code never imports the fake service, and no import cycle
runs between folders. `pytest` fails on a violation."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the package and pyproject.toml found under `root`."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache", "--no-logo", "--config", "pyproject.toml"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_package_keeps_its_contracts() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_an_import_running_up_breaks_the_layers(tmp_path: Path) -> None:
    """The contracts can fail: the wire format importing the CLI is caught."""
    shutil.copytree(
        ROOT / "invoicing_async",
        tmp_path / "invoicing_async",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    wire = tmp_path / "invoicing_async" / "_wire" / "__init__.py"
    wire.write_text(wire.read_text() + "\nimport invoicing_async._cli.progress\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "invoicing_async._wire is not allowed to import invoicing_async._cli" in result.stdout
