"""The public surface, computed from the modules (as httpx's test of its exported
members does): each public module exports what it defines or imports for its users, and
nothing else; every other module is private; the surface stays small."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import invoicing_async

README = Path(__file__).parents[2] / "README.md"

#: Public modules: no underscore in their dotted path (besides the entry point).
PUBLIC_MODULES = sorted(
    ["invoicing_async"]
    + [
        info.name
        for info in pkgutil.walk_packages(invoicing_async.__path__, "invoicing_async.")
        if not any(part.startswith("_") for part in info.name.split(".")[1:])
    ]
)
#: Distinct objects the core public modules (`invoicing_async`, `models`, `errors`, `sync`,
#: `testing`) may export between them. Policy: the core grows by names the specification
#: of the public API fixes (public-api.md) or a new model or error class; helpers go behind
#: `contrib` modules, each an integration behind its extra with at most
#: `MAX_CONTRIB_EXPORTS` names of its own. 80 at issue 32, then the blocking client, the
#: journal's errors, `APIResponse`, `InvalidArgumentError` and `StoreSuite`; the frame
#: helpers moved to `contrib.pandas` (issue 47): 82, with room for 8 more.
MAX_EXPORTED_OBJECTS = 90
MAX_CONTRIB_EXPORTS = 5
CORE_MODULES = [name for name in PUBLIC_MODULES if not name.startswith("invoicing_async.contrib")]
#: Classes dlt's decorators make in `contrib.dlt` (the config specs of the source and of
#: each resource, bound as they are first used): not ours to export.
GENERATED = re.compile(r"[A-Z]\w*Configuration")


def public(module_name: str) -> ModuleType:
    return importlib.import_module(module_name)


def exported_elsewhere(module_name: str) -> set[int]:
    """Ids of the objects the other public modules export."""
    return {
        id(getattr(public(name), member))
        for name in PUBLIC_MODULES
        if name != module_name
        for member in public(name).__all__
    }


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_a_public_module_exports_what_it_offers_and_nothing_is_missing(module_name: str) -> None:
    """A class or function of the package bound to a public-looking name in a public
    module is in its `__all__`, unless another public module exports it (an import)."""
    module = public(module_name)
    exported = set(module.__all__)
    assert len(exported) == len(module.__all__), "a name exported twice"
    elsewhere = exported_elsewhere(module_name)
    offered = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", "").startswith("invoicing_async")
        and id(value) not in elsewhere
    }
    offered = {name for name in offered if not GENERATED.fullmatch(name)}
    assert sorted(offered - exported) == []
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


def test_the_surface_stays_small() -> None:
    """Re-exports (an error in `invoicing_async` and in `errors`) count once."""
    objects = {
        id(getattr(public(name), member))
        for name in CORE_MODULES
        for member in public(name).__all__
    }
    assert len(objects) <= MAX_EXPORTED_OBJECTS


@pytest.mark.parametrize("module_name", sorted(set(PUBLIC_MODULES) - set(CORE_MODULES)))
def test_each_integration_stays_small(module_name: str) -> None:
    assert len(public(module_name).__all__) <= MAX_CONTRIB_EXPORTS


@pytest.mark.parametrize(
    ("old", "name"),
    [
        ("invoicing_async.models", "invoices_dataframe"),
        ("invoicing_async.models", "details_dataframe"),
        ("invoicing_async.sync", "store_dataframes"),
    ],
)
def test_a_moved_name_still_works_and_says_where_it_went(old: str, name: str) -> None:
    pandas = public("invoicing_async.contrib.pandas")
    with pytest.warns(
        DeprecationWarning, match=rf"moved to invoicing_async\.contrib\.pandas\.{name}"
    ):
        assert getattr(public(old), name) is getattr(pandas, name)
    assert name not in public(old).__all__


def test_no_planning_internals_are_exported() -> None:
    sync = public("invoicing_async.sync")
    assert not {"BATCH_SIZE", "SyncPlan", "plan_sync", "write_outcome"} & set(sync.__all__)


def test_every_other_module_is_private() -> None:
    """Implementation modules carry a leading underscore somewhere in their dotted path."""
    assert set(PUBLIC_MODULES) == {
        "invoicing_async",
        "invoicing_async.contrib",
        "invoicing_async.contrib.dlt",
        "invoicing_async.contrib.pandas",
        "invoicing_async.errors",
        "invoicing_async.models",
        "invoicing_async.sync",
        "invoicing_async.testing",
    }


def test_errors_are_the_same_objects_everywhere() -> None:
    errors = importlib.import_module("invoicing_async.errors")
    for name in errors.__all__:
        assert getattr(invoicing_async, name) is getattr(errors, name)
    models = importlib.import_module("invoicing_async.models")
    assert models.FieldError is errors.FieldError


def test_the_names_the_readme_uses_exist() -> None:
    """Every `ia.Name` and `from invoicing_async.x import …` in the README resolves."""
    text = README.read_text(encoding="utf-8")
    top = set(re.findall(r"\bia\.([A-Za-z_]\w*)", text))
    assert top, "the README shows no ia.* names"
    assert sorted(top - set(invoicing_async.__all__)) == []
    imported = re.findall(r"from (invoicing_async(?:\.\w+)?) import ([\w, ]+)", text)
    assert imported
    submodules = {name.rsplit(".", 1)[-1] for name in PUBLIC_MODULES} - {"invoicing_async"}
    for module_name, names in imported:
        for name in (n.split(" as ")[0].strip() for n in names.split(",")):
            if module_name == "invoicing_async" and name in submodules:
                continue
            assert name in public(module_name).__all__, f"{module_name}.{name}"


def test_a_budget_shows_its_settings_and_estimates_only() -> None:
    """The transport's hooks (take, settle, observe) are not part of `RateBudget`'s surface."""
    public = {name for name in dir(invoicing_async.RateBudget) if not name.startswith("_")}
    budget = invoicing_async.RateBudget()
    public |= {name for name in vars(budget) if not name.startswith("_")}
    assert public == {
        "available_now",
        "close",
        "key",
        "limit",
        "period",
        "refresh",
        "reserve",
        "shared",
        "snapshot",
        "time_for",
    }
