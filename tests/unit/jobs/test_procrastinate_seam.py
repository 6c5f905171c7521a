"""The worker's health signal rests on six methods of procrastinate's `JobManager` that
`WatchedJobManager` overrides: a release that renames one, changes its parameters or stops
calling it through `app.job_manager` would switch the signal off without an error. These
tests fail first (procrastinate is pinned below its next major release as well)."""

from __future__ import annotations

import inspect
from importlib import metadata

import pytest
from packaging.requirements import Requirement

procrastinate = pytest.importorskip("procrastinate")

from procrastinate import periodic, worker  # noqa: E402
from procrastinate.manager import JobManager  # noqa: E402

from invoicing_async._jobs.tasks import WatchedJobManager  # noqa: E402

#: Each overridden method, its parameters in procrastinate 3, and the module that calls it.
OVERRIDDEN = {
    "fetch_job": (["self", "queues", "worker_id"], worker),
    "listen_for_jobs": (["self", "on_notification", "queues"], worker),
    "defer_periodic_job": (["self", "job", "periodic_id", "defer_timestamp"], periodic),
    "update_heartbeat": (["self", "worker_id"], worker),
    "finish_job": (["self", "job", "status", "delete_job"], worker),
    "retry_job": (["self", "job", "retry_at", "priority", "queue", "lock"], worker),
}


@pytest.mark.parametrize("name", sorted(OVERRIDDEN))
def test_each_overridden_method_is_procrastinates_with_the_same_parameters(name: str) -> None:
    parameters, _ = OVERRIDDEN[name]
    theirs = getattr(JobManager, name)
    assert inspect.iscoroutinefunction(theirs)
    assert list(inspect.signature(theirs).parameters) == parameters
    assert name in vars(WatchedJobManager), "the override is gone"


@pytest.mark.parametrize("name", sorted(OVERRIDDEN))
def test_procrastinate_calls_each_one_through_the_apps_job_manager(name: str) -> None:
    _, caller = OVERRIDDEN[name]
    assert f"job_manager.{name}(" in inspect.getsource(caller)


def test_every_async_method_the_watcher_overrides_is_listed_here() -> None:
    ours = {
        name
        for name, value in vars(WatchedJobManager).items()
        if inspect.iscoroutinefunction(value) and not name.startswith("_")
    }
    assert ours == set(OVERRIDDEN)


def test_procrastinate_is_pinned_below_its_next_major_release() -> None:
    requires = metadata.requires("invoicing-async") or []
    pins = [Requirement(r) for r in requires if Requirement(r).name == "procrastinate"]
    assert pins, "procrastinate is a requirement of an extra"
    installed = metadata.version("procrastinate")
    major = int(installed.split(".")[0])
    for pin in pins:
        assert pin.specifier.contains(installed), (pin, installed)
        assert not pin.specifier.contains(f"{major + 1}.0"), f"{pin} admits {major + 1}.0"


def test_the_fetch_function_db_migrate_tunes_is_procrastinates() -> None:
    """`db migrate` turns sequential scans off for procrastinate's fetch function, by its
    name and arguments: a release that renames it would leave the fetch untuned."""
    from procrastinate.schema import SchemaManager

    schema = SchemaManager.get_schema()
    assert "FUNCTION procrastinate_fetch_job_v2(" in schema
    assert "target_queue_names character varying[]" in schema
    assert "p_worker_id bigint" in schema
