"""A client's life across event loops and notebook cells: typed errors, no warnings."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

import invoicing_async as ia
from invoicing_async.testing import FakeInvoicingService


def make_client(service: FakeInvoicingService) -> ia.InvoicingClient:
    return ia.InvoicingClient(
        service.base_url, auth=service.auth_for(service.account), budget=ia.RateBudget(1000)
    )


def test_a_client_used_on_a_second_loop_says_what_to_do(
    service_in_thread: FakeInvoicingService,
) -> None:
    client = make_client(service_in_thread)

    async def use() -> str | None:
        return (await client.current_session()).email

    assert asyncio.run(use()) == "api-user@example.com"
    with pytest.raises(ia.EventLoopError, match="Create the client inside the loop") as info:
        asyncio.run(use())  # a second asyncio.run: the first loop is closed
    assert isinstance(info.value, ia.InvoicingError)
    assert "closed" in str(info.value)
    asyncio.run(client.aclose())  # closes what is left without touching the dead loop
    assert client.is_closed
    with pytest.raises(ia.ClientClosedError, match="create a new InvoicingClient"):
        asyncio.run(use())
    # Warnings are errors in this suite: an unclosed session or socket would fail it here.
    gc.collect()


def test_one_client_per_loop_works_every_time(service_in_thread: FakeInvoicingService) -> None:
    async def run_once() -> str | None:
        async with make_client(service_in_thread) as client:
            return (await client.current_session()).email

    assert [asyncio.run(run_once()) for _ in range(3)] == ["api-user@example.com"] * 3


async def test_a_dropped_client_closes_quietly(service_in_thread: FakeInvoicingService) -> None:
    """A notebook cell run again builds a new client; the old one must not flood the cell."""
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        for _ in range(5):  # the cell, run five times
            client = make_client(service_in_thread)
            await client.current_session()
            del client
            gc.collect()
            await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert [c.get("message") for c in reported] == []
