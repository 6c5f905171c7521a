"""Shared fixtures: the fake service, clients of it in both formats, a scripted server."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

import invoicing_async as ia
from invoicing_async.testing import FakeInvoicingService
from tests.scripted import ScriptedServer


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
    """The fake service on a loop in its own thread: tests may run loops of their own, and
    its encoding never lands on the loop a test measures."""
    service = FakeInvoicingService(invoices=3, tls=False)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(service.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield service
    asyncio.run_coroutine_threadsafe(service.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


# Real PostgreSQL and Redis, started by the suite (tests/servers.py).
from tests.servers import postgres_server, postgres_url, redis_server, redis_url  # noqa: E402

__all__ = ["postgres_server", "postgres_url", "redis_server", "redis_url"]


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
