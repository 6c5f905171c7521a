"""Large responses are decoded off the event loop, and `iter()` yields as it decodes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest

import invoicing_async as ia
from invoicing_async._resources import decoding as decoding_module
from invoicing_async._resources import invoices as invoices_module
from invoicing_async.models import Invoice
from invoicing_async.testing import FakeInvoicingService, MockSender, mock_response, populate
from invoicing_async.testing._writers import dump_list

T = TypeVar("T")

GUARD = 60.0  # seconds: a hang (decoding that never lets the loop run), not a bound


async def beats_while_decoding(
    monkeypatch: pytest.MonkeyPatch, module: object, name: str, work: Callable[[], Awaitable[T]]
) -> tuple[list[str], T]:
    """Run `work` with `module.name` (a decoder) watched: each call waits, in its thread,
    until a heartbeat task on the loop has run since the call began, then decodes.

    The event proves the loop ran while a decode was under way: decoding on the loop's own
    thread fails at once (it could never see a beat), and no time is measured. Returns
    the names of the threads the decoder ran in, and what `work` returned.
    """
    loop_thread = threading.current_thread()
    real = getattr(module, name)
    threads: list[str] = []
    decoding = threading.Event()
    beat_seen = threading.Event()

    def watched(*args: Any, **kwargs: Any) -> Any:
        here = threading.current_thread()
        threads.append(here.name)
        if here is loop_thread:
            raise AssertionError("decoded on the event loop's thread")
        beat_seen.clear()
        decoding.set()
        try:
            if not beat_seen.wait(GUARD):
                raise AssertionError("the loop never ran while decoding")
            return real(*args, **kwargs)
        finally:
            decoding.clear()

    async def beat() -> None:
        while True:
            if decoding.is_set():
                beat_seen.set()
            await asyncio.sleep(0.001)  # a turn of the loop, not a spin

    monkeypatch.setattr(module, name, watched)
    task = asyncio.create_task(beat())
    try:
        result = await work()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return threads, result


@pytest.fixture
def thousand(service_in_thread: FakeInvoicingService) -> FakeInvoicingService:
    populate(service_in_thread.account, 1000, seed=5)
    return service_in_thread


@pytest.fixture
async def client_of(thousand: FakeInvoicingService, fmt: str) -> AsyncIterator[ia.InvoicingClient]:
    async with ia.InvoicingClient(
        thousand.base_url,
        auth=thousand.auth_for(thousand.account),
        format=fmt,  # type: ignore[arg-type]
        budget=ia.RateBudget(1000),
    ) as client:
        yield client


async def test_listing_a_thousand_invoices_does_not_hold_up_the_loop(
    client_of: ia.InvoicingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thousand invoices are decoded in a worker thread while the loop goes on running
    (a heartbeat seen during the decode): `list()` in the decoding thread, `iter()` in the
    iterating one, and `iter()` yields what `list()` returns. How long the loop is held up
    is benchmarks/bench_stall.py's (against the 50 ms target), not a bound here."""
    threads, invoices = await beats_while_decoding(
        monkeypatch, invoices_module, "load_list", client_of.invoices.list
    )
    assert len(invoices) == 1003
    assert threads
    assert all(t.startswith("invoicing-decode") for t in threads), threads

    async def iterate() -> list[Invoice]:
        return [invoice async for invoice in client_of.invoices.iter()]

    threads, iterated = await beats_while_decoding(
        monkeypatch, decoding_module, "each_model_batch", iterate
    )
    assert iterated == invoices
    assert threads
    assert all(t.startswith("invoicing-iter") for t in threads), threads


async def test_leaving_iter_early_stops_the_decoding(client_of: ia.InvoicingClient) -> None:
    seen = []
    async for invoice in client_of.invoices.iter():
        seen.append(invoice.id)
        if len(seen) == 150:
            break
    assert len(seen) == 150
    # The worker stopped (the generator's cleanup waited for it); the client goes on.
    assert len(await client_of.invoices.list("open")) > 0


@pytest.mark.parametrize("fmt", ["xml", "json"])
async def test_iter_raises_the_decode_error_of_a_large_bad_body(fmt: str) -> None:
    service = FakeInvoicingService(invoices=300, seed=2)
    good = await _body(service, fmt)
    broken = good[: len(good) // 2]  # cut in the middle: far past the first batches
    sender = MockSender(lambda _request: mock_response(200, broken))
    async with ia.InvoicingClient(
        "https://acme.example.com",
        auth=ia.BasicAuth("u", "p"),
        format=fmt,  # type: ignore[arg-type]
        sender=sender,
    ) as client:
        with pytest.raises(ia.DecodeError):
            async for _invoice in client.invoices.iter():
                pass


async def _body(service: FakeInvoicingService, fmt: str) -> bytes:
    return dump_list(list(service.account.invoices.values()), fmt, Invoice)  # type: ignore[arg-type]
