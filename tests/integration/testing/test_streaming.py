"""Long lists go out chunked, piece by piece, and still read back whole (and faults hold)."""

from __future__ import annotations

import aiohttp
import pytest

from invoicing_async._models.documents import Format
from invoicing_async.models import Invoice
from invoicing_async.testing import FakeInvoicingService, _app, populate
from invoicing_async.testing._writers import dump_list, dump_sync_entries

ACCEPT = {"xml": "application/xml", "json": "application/json"}


@pytest.mark.parametrize("fmt", ["xml", "json"])
async def test_a_long_list_is_chunked_and_whole(
    service: FakeInvoicingService, http: aiohttp.ClientSession, fmt: Format
) -> None:
    populate(service.account, _app.STREAM_INVOICES + 50, seed=4)
    expected = dump_list(service.account.list_invoices(), fmt, Invoice, real_shape=True)
    async with http.get("/api/v1.0/invoices", headers={"Accept": ACCEPT[fmt]}) as resp:
        assert resp.status == 200
        assert resp.headers["Transfer-Encoding"] == "chunked"
        assert "Content-Length" not in resp.headers
        assert resp.headers["Content-Type"].startswith(ACCEPT[fmt])
        assert "Date" in resp.headers
        assert "X-RateLimit-Remaining" in resp.headers
        body = await resp.read()
    assert body == expected
    async with service.client(format=fmt) as client:
        assert len(await client.invoices.list()) == _app.STREAM_INVOICES + 50


async def test_a_short_list_keeps_its_content_length(
    service: FakeInvoicingService, http: aiohttp.ClientSession
) -> None:
    populate(service.account, 3, seed=4)
    async with http.get("/api/v1.0/invoices", headers={"Accept": ACCEPT["xml"]}) as resp:
        body = await resp.read()
        assert resp.headers["Content-Length"] == str(len(body))
    assert body == dump_list(service.account.list_invoices(), "xml", Invoice, real_shape=True)


@pytest.mark.slow
async def test_the_first_piece_goes_before_the_list_is_encoded(
    service: FakeInvoicingService, http: aiohttp.ClientSession
) -> None:
    populate(service.account, 3000, seed=5)
    async with http.get("/api/v1.0/invoices", headers={"Accept": ACCEPT["xml"]}) as resp:
        first = await resp.content.readany()
        assert first.startswith(b'<?xml version="1.0" encoding="utf-8"?>\n<invoices type="array">')
        # The client reads no further: the service has stopped well short of the end.
        assert service.account.documents.misses < 3000
        rest = await resp.read()
    assert first + rest == dump_list(
        service.account.list_invoices(), "xml", Invoice, real_shape=True
    )
    assert service.account.documents.misses == 3000


@pytest.mark.parametrize("fmt", ["xml", "json"])
async def test_a_long_sync_list_is_chunked(
    service: FakeInvoicingService,
    http: aiohttp.ClientSession,
    fmt: Format,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_app, "STREAM_SYNC_ENTRIES", 10)
    populate(service.account, 40, seed=6)
    service.account.faults.mutate_after_list = 5
    expected = dump_sync_entries(service.account.sync_list(), fmt)
    path = "/api/v1.0/invoices/sync_list_ids"
    async with http.get(path, headers={"Accept": ACCEPT[fmt]}) as resp:
        assert resp.headers["Transfer-Encoding"] == "chunked"
        assert await resp.read() == expected  # as listed, before the 5 changes after it
    assert service.account.counters["changed after list"] == 5
    assert dump_sync_entries(service.account.sync_list(), fmt) != expected


async def test_a_long_list_can_still_be_cut_short(
    service: FakeInvoicingService, http: aiohttp.ClientSession
) -> None:
    populate(service.account, _app.STREAM_INVOICES + 1, seed=7)
    service.account.faults.truncate_rate = 1.0
    async with http.get("/api/v1.0/invoices", headers={"Accept": ACCEPT["xml"]}) as resp:
        assert int(resp.headers["Content-Length"]) > 0
        with pytest.raises(aiohttp.ClientPayloadError):
            await resp.read()
    assert service.account.counters["truncated"] == 1
