"""A stored copy equals the invoice the client reads fresh, in both formats: XML's typed
values beyond the specification (`type="decimal"`, `type="dateTime"`) come back from a
store's JSON document as text, and equality reads them as that text."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import attrs

import invoicing_async as ia
from invoicing_async.sync import MemoryStore, SQLiteStore, SyncEngine
from invoicing_async.testing import FakeInvoicingService


async def test_every_stored_copy_equals_the_fresh_one(fmt: str, tmp_path: Path) -> None:
    stores: list[MemoryStore | SQLiteStore] = [
        MemoryStore(),
        SQLiteStore(tmp_path / "copies.sqlite3"),
    ]
    service = FakeInvoicingService(invoices=12, seed=3)
    async with service, service.client(format=fmt) as client:
        for store in stores:
            async with store:
                await SyncEngine(client, store).run()
                for invoice_id in sorted(service.account.invoices):
                    stored = await store.get(invoice_id)
                    fresh = await client.invoices.get(invoice_id)
                    assert stored == fresh, invoice_id
    sent = [i for i in service.account.invoices.values() if i.state != "draft"]
    assert sent, "the seed has sent invoices (their sent_at is a datetime in XML)"


def test_equality_reads_extra_values_as_a_json_document_holds_them() -> None:
    typed = ia.models.Invoice(id=1, extra={"t": [{"x": Decimal("1.50"), "f": 0.5}]})
    as_text = ia.models.Invoice(id=1, extra={"t": [{"x": "1.50", "f": "0.5"}]})
    assert typed == as_text
    assert typed != attrs.evolve(as_text, extra={"t": [{"x": "1.5", "f": "0.5"}]})
    assert typed != attrs.evolve(as_text, extra={"t": []})
