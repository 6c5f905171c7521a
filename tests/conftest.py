"""Shared fixtures (the fake service, clients of it in both formats, a scripted server),
the `servers` marker and the hypothesis profiles."""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import invoicing_async as ia
from invoicing_async.testing import FakeClock, FakeInvoicingService, _service
from tests.scripted import ScriptedAPI

pytest_plugins = ["pytester"]  # the pytest plugin's own tests run user test files

# Example counts are the profile's: `dev` (small, the default) for local runs, `ci` (larger)
# when CI=true; HYPOTHESIS_PROFILE names either one explicitly. Neither has a deadline or the
# too-slow health check: both are wall-clock bounds, which a busy machine breaks.
UNTIMED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", UNTIMED, max_examples=10)
settings.register_profile("ci", UNTIMED, max_examples=200, print_blob=True)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE")
    or ("ci" if os.environ.get("CI", "").lower() == "true" else "dev")
)


SERVER_FIXTURES = frozenset(
    {"postgres_server", "postgres_url", "empty_postgres_url", "redis_server", "redis_url"}
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `servers` every test that asks for PostgreSQL or Redis by fixture name, and
    `slow` every `stress` test (so `-m "not slow"` leaves the stress out too).

    Tests that reach a server through a parameter (`request.getfixturevalue`) carry the
    mark on that parameter (`tests.servers.POSTGRES`, `REDIS`); the server fixtures refuse
    a test without it, so none slips into the fast subset.
    """
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.servers)
        if item.get_closest_marker("stress") is not None:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _fake_service_clock_at_noon(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake service made without a clock starts at noon UTC today, as the demo's does: its
    daily run turns open invoices late at midnight, which a test running across one saw as
    changes between two syncs or loads."""
    noon = dt.datetime.combine(
        dt.datetime.now(dt.timezone.utc).date(), dt.time(12), dt.timezone.utc
    )
    monkeypatch.setattr(_service, "FakeClock", lambda: FakeClock(noon))


@pytest.fixture(params=["xml", "json"])
def fmt(request: pytest.FixtureRequest) -> str:
    """Every test that takes `fmt` runs once per wire format."""
    return str(request.param)


@pytest.fixture
async def service() -> AsyncIterator[FakeInvoicingService]:
    async with FakeInvoicingService(invoices=0) as svc:
        yield svc


@pytest.fixture
async def client(service: FakeInvoicingService, fmt: str) -> AsyncIterator[ia.InvoicingClient]:
    async with service.client(format=fmt) as c:
        yield c


@pytest.fixture
def service_in_thread() -> Iterator[FakeInvoicingService]:
    """A small fake service (3 invoices, plain http) in its own thread."""
    with FakeInvoicingService(invoices=3, tls=False).serve_in_thread() as service:
        yield service


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedAPI]:
    async with ScriptedAPI() as server:
        yield server


# Real PostgreSQL and Redis, started by the suite (tests/servers.py).
from tests.servers import (  # noqa: E402
    POSTGRES,
    REDIS,
    empty_postgres_url,
    postgres_server,
    postgres_template,
    postgres_url,
    redis_server,
    redis_url,
)

__all__ = [
    "empty_postgres_url",
    "postgres_server",
    "postgres_template",
    "postgres_url",
    "redis_server",
    "redis_url",
    "shared_budget_url",
]

#: The stores a budget is shared through (`RateBudget(shared=URL)`), in one place.
SHARED_BUDGET_BACKENDS = ["sqlite", POSTGRES, REDIS]


@pytest.fixture(params=SHARED_BUDGET_BACKENDS)
def shared_budget_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of each store a budget can be shared through: a SQLite file, then PostgreSQL
    and Redis servers (marked `servers`)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'budget.db'}"
    fixture = "postgres_url" if request.param == "postgres" else "redis_url"
    return str(request.getfixturevalue(fixture))


@pytest.fixture(autouse=True)
def _package_log_level() -> Iterator[None]:
    """Commands run in-process set the package's log level and handler: undone after."""
    package, root = logging.getLogger("invoicing_async"), logging.getLogger()
    level, before = package.level, set(root.handlers)
    yield
    package.setLevel(level)
    for handler in set(root.handlers) - before:
        if not type(handler).__module__.startswith("_pytest"):
            root.removeHandler(handler)
