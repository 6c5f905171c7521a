"""The `[notebook]` extra brings what a notebook's progress widget needs: without
ipywidgets, tqdm warns "IProgress not found" on every sync and prints text."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

from tqdm.notebook import tqdm as notebook_tqdm
from tqdm.std import TqdmWarning

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    return extras


def _names(requirements: list[str]) -> set[str]:
    return {r.split(">")[0].split("[")[0].split(";")[0].strip() for r in requirements}


def test_the_notebook_extra_brings_ipywidgets_and_the_frames() -> None:
    extras = _extras()
    assert {"ipywidgets", "pandas", "pyarrow"} <= _names(extras["notebook"])
    assert _names(extras["notebook"]) <= _names(extras["dev"])  # the tests have it too


def test_a_notebook_bar_is_a_widget_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", TqdmWarning)
        bar = notebook_tqdm(total=3, disable=False)
        bar.update(3)
        bar.close()
    assert bar.container is not None  # the ipywidgets box, not tqdm's text fallback
