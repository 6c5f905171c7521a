"""Every operation against the fake service, in both formats: the whole stack for real."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async.testing import FakeInvoicingService


def new_invoice(**changes: object) -> m.Invoice:
    return m.Invoice(
        contact_id=7,
        po_number="Café & <Co> €",
        details=[
            m.InvoiceDetail(
                description="Work", amount="2 x", tax_rate_id=1, price=Decimal("25.00")
            ),
            m.InvoiceDetail(description="Travel", tax_rate_id=3, price=Decimal("10.50")),
        ],
        **changes,  # type: ignore[arg-type]
    )


@pytest.mark.slow
async def test_invoice_lifecycle(client: ia.InvoicingClient, service: FakeInvoicingService) -> None:
    created = await client.invoices.create(new_invoice())
    assert created.state == m.InvoiceState.DRAFT
    assert created.invoice_id is None
    assert created.concept_id is not None
    assert created.po_number == "Café & <Co> €"
    # 2 x 25.00 at 21% + 10.50 at 0%
    assert created.total_price_excl_tax == Decimal("60.50")
    assert created.total_price_incl_tax == Decimal("71.00")
    assert [h.action for h in created.history] == ["invoice_created"]

    travel = created.details[1]
    updated = await client.invoices.update(
        created,
        po_number="PO-9",
        details=[
            m.InvoiceDetail(id=travel.id, destroy=True),
            m.InvoiceDetail(id=created.details[0].id, price=Decimal("30.00")),
            m.InvoiceDetail(description="Extra", tax_rate_id=2, price=Decimal("100")),
        ],
    )
    assert updated.po_number == "PO-9"
    assert [d.description for d in updated.details] == ["Work", "Extra"]
    assert updated.total_price_incl_tax == Decimal("72.60") + Decimal("109.00")
    assert updated.revision is not None
    assert updated.revision > (created.revision or 0)

    sent = await client.invoices.send_invoice(
        created, email="ann@example.com", invoice_email="Hello", send_method="hand"
    )
    assert sent.state == m.InvoiceState.OPEN
    assert sent.invoice_id is not None
    assert sent.invoice_id.startswith(f"{dt.date.today().year}-")
    assert sent.concept_id is None
    assert sent.history[-1].action == m.HistoryAction.INVOICE_SENT_HAND

    by_number = await client.invoices.get_by_invoice_id(sent.invoice_id)
    assert by_number.id == created.id

    reminded = await client.invoices.send_reminder(
        sent, email="ann@example.com", invoice_email="Please pay", send_method="email"
    )
    assert reminded.history[-1].action == "invoice_reminder_sent_email"

    paid = await client.invoices.register_payment(
        reminded,
        m.InvoicePayment(
            payment_date=dt.date(2014, 7, 31),
            payment_method="bank_transfer",
            price=sent.total_price_incl_tax,
            send_email=False,
        ),
    )
    assert paid.id == created.id
    assert paid.state == m.InvoiceState.PAID
    assert paid.total_unpaid == 0
    assert paid.total_paid == sent.total_price_incl_tax
    assert [p.price for p in paid.payments] == [sent.total_price_incl_tax]
    assert await client.invoices.get(created) == paid

    assert await client.invoices.list() == [paid]
    assert [i.id for i in await client.invoices.list(filter="paid")] == [created.id]
    assert await client.invoices.list(filter="draft") == []
    assert len(await client.invoices.advanced_filter({"state": "paid"})) == 1

    entries = await client.invoices.sync_list_ids()
    assert [(e.id, e.revision) for e in entries] == [(paid.id, paid.revision)]
    (fetched,) = await client.invoices.sync_fetch_ids([created, 999])
    assert fetched == paid

    await client.invoices.delete(paid)
    with pytest.raises(ia.NotFoundError):
        await client.invoices.get(created)
    assert await client.invoices.sync_list_ids() == []


@pytest.mark.slow
async def test_recurring_templates(client: ia.InvoicingClient) -> None:
    template = await client.recurring_templates.create(
        m.RecurringTemplate(
            contact_id=3,
            frequency=1,
            frequency_type=m.FrequencyType.MONTHLY,
            details=[
                m.RecurringTemplateDetail(description="Hosting", tax_rate_id=1, price=Decimal("10"))
            ],
        )
    )
    assert template.active is True
    assert template.total_price_incl_tax == Decimal("12.10")
    assert template.next_date == dt.date.today() + dt.timedelta(days=1)
    changed = await client.recurring_templates.update(template, frequency=2, send_invoice=True)
    assert (changed.frequency, changed.send_invoice) == (2, True)
    assert await client.recurring_templates.get(template) == changed
    assert await client.recurring_templates.list() == [changed]
    await client.recurring_templates.delete(changed)
    with pytest.raises(ia.NotFoundError):
        await client.recurring_templates.get(template)


async def test_current_session(client: ia.InvoicingClient, service: FakeInvoicingService) -> None:
    me = await client.current_session()
    assert me.email == f"{service.username}@example.com"
    assert me.time_zone == "Europe/Amsterdam"


async def test_server_side_validation_without_client_checks(
    service: FakeInvoicingService, fmt: str
) -> None:
    async with service.client(format=fmt, validate=False) as client:
        with pytest.raises(ia.ValidationError) as info:
            await client.invoices.create(m.Invoice(details=[m.InvoiceDetail(description="x")]))
    attributes = {e.attribute for e in info.value.errors}
    assert attributes == {"contact_id", "details.tax_rate_id"}
    assert info.value.status == 422


async def test_wrong_password_is_an_authentication_error(service: FakeInvoicingService) -> None:
    async with ia.InvoicingClient(
        service.base_url, auth=ia.BasicAuth(service.username, "wrong"), ssl=service.ssl_context
    ) as client:
        with pytest.raises(ia.AuthenticationError):
            await client.current_session()


async def test_budget_follows_the_server(service: FakeInvoicingService) -> None:
    async with service.client(max_wait=0) as client:
        await client.current_session()
        snapshot = client.budget.snapshot()
    assert snapshot.server_limit == 350
    assert snapshot.server_remaining == 349
