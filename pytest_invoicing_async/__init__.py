"""The invoicing-async pytest plugin (the `pytest11` entry point `invoicing_async`): fixtures
over the fake service and strict routes, configured by the `invoicing` marker.

Loading it imports neither the package nor aiohttp (outside `invoicing_async`, whose own
import pulls the client in): each fixture imports what it needs when a test asks for it,
so tests that use none pay nothing. `-p no:invoicing_async` turns it off."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.util
import random
import sys
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from invoicing_async import BlockingInvoicingClient, InvoicingClient
    from invoicing_async.testing import FakeClock, FakeInvoicingService
    from invoicing_async.testing._routes import StrictRoutes

__all__ = [
    "InvoicingSettings",
    "invoicing_blocking_client",
    "invoicing_client",
    "invoicing_clock",
    "invoicing_fake",
    "invoicing_mock",
    "invoicing_threaded_fake",
    "settings_of",
]

MARKER = "invoicing"
MARKER_HELP = (
    "invoicing(invoices=0, seed=0, format='xml', limit=350, period=3600.0, now=None, "
    "faults={}, assert_all_called=True): the invoicing_* fixtures' fake service, client "
    "and strict routes for this test"
)


@dataclasses.dataclass(frozen=True)
class InvoicingSettings:
    """What the `invoicing` marker sets (its keywords), with the defaults of a bare test."""

    invoices: int = 0  # generated invoices on the default account
    seed: int = 0  # of the generated data and of the faults' dice
    format: str = "xml"  # the client's
    limit: int = 350  # the hourly budget
    period: float = 3600.0
    now: dt.datetime | None = None  # a frozen clock at this time; None: wall time, movable
    faults: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # FaultPlan attributes
    assert_all_called: bool = True  # invoicing_mock: a route never called fails the test


def settings_of(request: pytest.FixtureRequest) -> InvoicingSettings:
    """The test's settings: its closest `invoicing` marker (a class's or module's too),
    checked, so a misspelt keyword fails the test instead of being ignored."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        return InvoicingSettings()
    if marker.args:
        raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keywords only: {MARKER_HELP}")
    known = {f.name for f in dataclasses.fields(InvoicingSettings)}
    unknown = sorted(set(marker.kwargs) - known)
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: unknown {unknown}; {MARKER_HELP}")
    return InvoicingSettings(**marker.kwargs)


def apply_faults(service: FakeInvoicingService, settings: InvoicingSettings) -> None:
    """Set each of `faults` on the default account's `FaultPlan` by attribute name (new
    fault kinds need no change here), its dice seeded from `seed`: a run repeats."""
    plan = service.account.faults
    for name, value in settings.faults.items():
        if name.startswith("_") or not hasattr(plan, name) or name in {"rng", "seed"}:
            raise pytest.UsageError(
                f"@pytest.mark.{MARKER}(faults=…): FaultPlan has no fault {name!r}"
            )
        setattr(plan, name, set(value) if name == "missing_ids" else value)
    plan.seed = settings.seed
    plan.rng = random.Random(settings.seed)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    if sys.version_info < (3, 11):
        # 3.10's asyncio SSL layer drops the transport of a connection the peer cut (the
        # fake's dropped and truncated responses, its faults) without closing it, and says
        # so at collection; 3.11 rewrote that layer. Not the test's fault: not an error.
        for line in (
            "ignore:unclosed transport <asyncio.sslproto._SSLProtocolTransport:ResourceWarning",
            "ignore:Exception ignored in. <function _SSLProtocolTransport.__del__"
            ":pytest.PytestUnraisableExceptionWarning",
        ):
            config.addinivalue_line("filterwarnings", line)


_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember whether a test's body failed: `invoicing_mock` then leaves its own
    teardown check out (the failure already says what went wrong)."""
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_FAILED] = True
    return report


def _async_fixture(fn: Callable[..., Any]) -> Any:
    """`pytest_asyncio.fixture`: the fixture runs in the test's loop in auto and strict
    modes alike. Without pytest-asyncio, a fixture that says what to install."""
    if importlib.util.find_spec("pytest_asyncio") is None:

        def missing() -> None:
            pytest.fail("the invoicing_* fixtures need pytest-asyncio: pip install pytest-asyncio")

        return pytest.fixture(name=fn.__name__)(missing)
    import pytest_asyncio

    return pytest_asyncio.fixture(fn)


def _new_service(settings: InvoicingSettings) -> FakeInvoicingService:
    from invoicing_async.testing import FakeClock, FakeInvoicingService

    clock = FakeClock(settings.now, frozen=True) if settings.now is not None else None
    service = FakeInvoicingService(
        invoices=settings.invoices,
        seed=settings.seed,
        limit=settings.limit,
        period=settings.period,
        clock=clock,
    )
    apply_faults(service, settings)
    return service


@_async_fixture
async def invoicing_fake(request: pytest.FixtureRequest) -> AsyncIterator[FakeInvoicingService]:
    """A started `FakeInvoicingService` of this test's own (data, clock, counters,
    faults), as the `invoicing` marker configures it; stopped after the test."""
    async with _new_service(settings_of(request)) as service:
        yield service


@pytest.fixture
def invoicing_threaded_fake(request: pytest.FixtureRequest) -> Iterator[FakeInvoicingService]:
    """`invoicing_fake` for tests that are not async (a Django view, a Celery task, a
    script): served from a loop in a thread of its own, which blocking calls do not stop."""
    with _new_service(settings_of(request)).serve_in_thread() as service:
        yield service


@_async_fixture
async def invoicing_client(
    request: pytest.FixtureRequest, invoicing_fake: FakeInvoicingService
) -> AsyncIterator[InvoicingClient]:
    """An `InvoicingClient` of `invoicing_fake`'s default account, in the marker's
    `format`, with a budget of the account's limit; closed after the test."""
    settings = settings_of(request)
    async with invoicing_fake.client(format=settings.format) as client:
        yield client


@pytest.fixture
def invoicing_blocking_client(
    request: pytest.FixtureRequest, invoicing_threaded_fake: FakeInvoicingService
) -> Iterator[BlockingInvoicingClient]:
    """A `BlockingInvoicingClient` of `invoicing_threaded_fake`'s default account, in the
    marker's `format`, with a budget of the account's limit; closed after the test."""
    settings = settings_of(request)
    with invoicing_threaded_fake.blocking_client(format=settings.format) as client:
        yield client


@pytest.fixture
def invoicing_clock(invoicing_fake: FakeInvoicingService) -> FakeClock:
    """`invoicing_fake`'s clock: `advance(seconds, days=…)` and `set(when)` move the
    service's time (due dates, "late", the hourly window) without waiting."""
    return invoicing_fake.clock


@_async_fixture
async def invoicing_mock(request: pytest.FixtureRequest) -> AsyncIterator[StrictRoutes]:
    """Strict routes answering in memory (`invoicing_mock.client()`): an unexpected
    request fails the test, showing it, and so does a route never called (unless
    `assert_all_called=False`, on the marker or the object); `.calls` records them."""
    from invoicing_async.testing._routes import StrictRoutes

    settings = settings_of(request)
    routes = StrictRoutes(assert_all_called=settings.assert_all_called)
    try:
        yield routes
    finally:
        await routes.aclose()
    if not request.node.stash.get(_FAILED, False):
        routes.verify()
