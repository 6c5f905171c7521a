"""The names `shared/spec/public-api.md` fixes, used exactly as outside code uses them."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest

import invoicing_async as ia
from invoicing_async import errors
from invoicing_async import models as m
from invoicing_async.sync import SQLiteStore, SyncEngine
from invoicing_async.testing import FakeInvoicingService


def test_error_names_and_hierarchy() -> None:
    for name in (
        "AuthenticationError",
        "RateLimitExceeded",
        "ForbiddenError",
        "NotFoundError",
        "NotAcceptableError",
        "ValidationError",
        "ServerError",
        "NotImplementedByServerError",
        "InsecureTransportError",
        "DecodeError",
        "APIConnectionError",
        "APITimeoutError",
    ):
        cls = getattr(errors, name)
        assert cls is getattr(ia, name)
        assert issubclass(cls, ia.InvoicingError)
    assert m.FieldError("a", "b").attribute == "a"


@pytest.mark.slow
async def test_the_documented_walkthrough(tmp_path: Path) -> None:
    async with FakeInvoicingService(invoices=150, seed=9) as service:
        assert service.base_url.startswith("https://127.0.0.1:")
        assert service.auth == ia.BasicAuth(service.username, service.password)
        async with ia.InvoicingClient(
            service.base_url,
            auth=service.auth,
            format="json",
            budget=ia.RateBudget(limit=100_000, period=3600.0),
            ssl=service.ssl_context,
        ) as client:
            me = await client.current_session()
            assert type(me) is m.CurrentSession
            assert me == service.account.session()
            everything = await client.invoices.list()
            assert len(everything) == 150
            open_ = await client.invoices.list(filter="open")
            assert open_
            assert {i.state for i in open_} <= {"open", "late"}  # sent and not paid
            assert len(open_) < len(everything)
            inv = await client.invoices.create(
                m.Invoice(
                    contact_id=7, details=[m.InvoiceDetail(description="Work", tax_rate_id=1)]
                )
            )
            assert inv.id is not None
            inv = await client.invoices.update(
                inv.id,
                po_number="PO-9",
                details=[
                    m.InvoiceDetail(id=inv.details[0].id, destroy=True),
                    m.InvoiceDetail(description="New", tax_rate_id=2, price=Decimal("50")),
                ],
            )
            inv = await client.invoices.send_invoice(
                inv, email="a@example.com", invoice_email="Hello", send_method="email"
            )
            assert inv.invoice_id is not None
            assert (await client.invoices.get_by_invoice_id(inv.invoice_id)).id == inv.id
            await client.invoices.send_reminder(
                inv, email="a@example.com", invoice_email="Reminder", send_method="email"
            )
            paid = await client.invoices.register_payment(
                inv,
                m.InvoicePayment(
                    payment_date=dt.date(2014, 7, 31),
                    payment_method="bank_transfer",
                    price=Decimal("60.50"),
                    send_email=False,
                ),
            )
            assert isinstance(paid, m.Invoice)  # the updated invoice, not the payment
            assert (paid.id, paid.total_paid) == (inv.id, Decimal("60.50"))
            assert paid.payments[-1].payment_method == "bank_transfer"
            assert paid.id is not None
            entries = await client.invoices.sync_list_ids()
            assert {(e.id, e.revision) for e in entries} == {
                (i.id, i.revision) for i in service.account.invoices.values()
            }
            assert all(type(e) is m.SyncEntry for e in entries)
            batch = await client.invoices.sync_fetch_ids([e.id for e in entries])
            assert len(batch) == 151
            assert await client.recurring_templates.list() == []
            async with SQLiteStore(tmp_path / "invoices.sqlite3") as store:
                report = await SyncEngine(client, store).run()
                assert (report.listed, report.created, report.requests) == (151, 151, 3)
                assert report.updated == report.deleted == report.unchanged == 0
                assert report.fetched == 151
                assert (await store.get(paid.id)) == await client.invoices.get(paid)
                assert len(await store.revisions()) == 151
            await client.invoices.delete(paid)
            store = SQLiteStore(tmp_path / "invoices.sqlite3")
            await SyncEngine(client, store).run()
            assert await store.get(paid.id) is None  # None once deleted
            await store.close()


async def test_raw_responses_as_the_spec_writes_them() -> None:
    async with (
        FakeInvoicingService(invoices=2) as service,
        ia.InvoicingClient(service.base_url, auth=service.auth, ssl=service.ssl_context) as client,
    ):
        ident = min(service.account.invoices)
        raw = await client.invoices.with_raw_response.get(ident)
        assert isinstance(raw, ia.APIResponse)
        assert raw.status_code == 200
        assert int(raw.headers["X-RateLimit-Limit"]) == raw.rate_limit
        assert int(raw.headers["X-RateLimit-Remaining"]) == raw.rate_limit_remaining
        invoice = raw.parse()
        assert isinstance(invoice, m.Invoice)
        assert invoice.id == ident
        templates = await client.recurring_templates.with_raw_response.list()
        assert isinstance(templates.parse(), list)
        raw = await client.with_raw_response.current_session()
        assert isinstance(raw.parse(), m.CurrentSession)
