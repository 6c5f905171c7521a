"""The fake's kept invoice documents never drift from a from-scratch encode."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import attrs
import pytest

from invoicing_async._models.payloads import Format, dump_model
from invoicing_async.models import (
    Invoice,
    InvoiceDetail,
    InvoicePayment,
    RecurringTemplate,
    RecurringTemplateDetail,
)
from invoicing_async.testing import Account, FakeClock, FakeInvoicingService, populate
from invoicing_async.testing._documents import sync_chunks
from invoicing_async.testing._writers import dump_invoice, dump_list, dump_sync_entries

FORMATS: tuple[Format, ...] = ("xml", "json")
SEND = {"email": "a@example.com", "invoice_email": "b@example.com", "send_method": "email"}


def assert_fresh(account: Account) -> None:
    """Every kept document, and every list of them, equals a from-scratch encode."""
    invoices = account.list_invoices()
    for fmt in FORMATS:
        real = account.documents.real_shape
        expected_list = dump_list(invoices, fmt, Invoice, real_shape=real)
        assert account.documents.list_body(invoices, fmt) == expected_list
        pieces = list(account.documents.list_chunks(invoices, fmt, size=4096))
        assert b"".join(pieces) == expected_list
        for invoice in invoices:
            expected = dump_invoice(invoice, fmt, real_shape=real)
            assert account.documents.document(invoice, fmt) == expected


def draft(account: Account) -> Invoice:
    line = InvoiceDetail(description="Work & <play>\r\n", tax_rate_id=1, price=Decimal("10"))
    return account.create_invoice(Invoice(contact_id=7, company_name="Ann", details=[line]))


@pytest.fixture
def account() -> Account:
    # Frozen: changes made one after the other fall within one second.
    clock = FakeClock(dt.datetime(2014, 6, 2, 12, 0, 0, 500_000), frozen=True)
    service = FakeInvoicingService(invoices=40, seed=3, clock=clock)
    assert_fresh(service.account)  # everything kept from here on
    return service.account


def test_unchanged_invoices_are_encoded_once(account: Account) -> None:
    misses = account.documents.misses
    assert_fresh(account)
    assert account.documents.misses == misses
    assert account.documents.hits > 0


def test_every_change_is_seen(account: Account) -> None:
    ids = sorted(account.invoices)
    account.update_invoice(ids[0], {"po_number": "PO-1"})
    assert_fresh(account)
    created = draft(account)
    assert_fresh(account)
    assert created.id is not None
    account.send_invoice(created.id, SEND, reminder=False)
    assert_fresh(account)
    account.register_payment(
        created.id, InvoicePayment(price=Decimal("5"), payment_method="bank_transfer")
    )
    assert_fresh(account)
    account.delete_invoice(ids[1])
    assert_fresh(account)
    assert ids[1] not in account.invoices


@pytest.mark.slow
def test_changes_within_one_second_are_each_seen(account: Account) -> None:
    created = draft(account)
    assert created.id is not None
    account.send_invoice(created.id, SEND, reminder=False)
    assert_fresh(account)
    second = account.clock.now().replace(microsecond=0)
    for n in range(3):  # the clock stands still: all within one second
        account.register_payment(
            created.id, InvoicePayment(price=Decimal("1"), payment_method="bank_transfer")
        )
        assert_fresh(account)
        account.send_invoice(created.id, SEND, reminder=True)
        assert_fresh(account)
        account.mutate(created.id)
        assert_fresh(account)
        assert len(account.invoices[created.id].payments) == n + 1
    assert account.clock.now().replace(microsecond=0) == second
    assert account.invoices[created.id].updated_at == second


def test_a_same_revision_change_is_seen(account: Account) -> None:
    """Even a change that keeps the revision (made by hand, then announced) is seen."""
    invoice = account.invoices[min(account.invoices)]
    revision = invoice.revision
    invoice.po_number = "by hand"
    account.documents.changed(invoice.id)
    assert invoice.revision == revision
    assert_fresh(account)
    assert invoice.id is not None
    account.invoices[invoice.id] = attrs.evolve(invoice, po_number="replaced")
    assert_fresh(account)  # another object under the same id: not the kept one


def test_falling_due_is_seen(account: Account) -> None:
    created = draft(account)
    assert created.id is not None
    account.send_invoice(created.id, SEND, reminder=False)
    assert_fresh(account)
    account.clock.advance(days=30)
    account.refresh()
    assert account.invoices[created.id].state == "late"
    assert_fresh(account)


def test_generated_from_a_template_is_seen(account: Account) -> None:
    line = RecurringTemplateDetail(description="Hosting", tax_rate_id=1, price=Decimal("10"))
    account.create_template(
        RecurringTemplate(contact_id=1, frequency=1, frequency_type=2, occurences=2, details=[line])
    )
    account.clock.advance(days=2)
    made = account.run_templates()
    assert made
    assert all(i.recurring_template_id is not None for i in made)
    assert_fresh(account)


def test_a_full_allowance_still_gives_fresh_documents() -> None:
    service = FakeInvoicingService(invoices=30, seed=1)
    other = service.add_account("other")
    populate(other, 30, seed=2)
    service.documents.limit = 40_000
    assert_fresh(service.account)
    assert_fresh(other)
    kept = service.account.documents.size + other.documents.size
    assert service.account.documents.size > 0
    assert kept == service.documents.used <= 40_000  # the accounts share one allowance
    service.account.mutate(min(service.account.invoices))
    other.delete_invoice(min(other.invoices))
    assert_fresh(service.account)
    assert_fresh(other)
    assert service.account.documents.size + other.documents.size == service.documents.used


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("count", [0, 1, 1000])
def test_sync_list_pieces_are_dump_sync_entries(fmt: Format, count: int) -> None:
    service = FakeInvoicingService(invoices=count, seed=2)
    entries = service.account.sync_list()
    pieces = list(sync_chunks(entries, fmt, size=512))
    assert b"".join(pieces) == dump_sync_entries(entries, fmt)
    assert len(pieces) > 1 or count < 100


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_empty_list(fmt: Format) -> None:
    service = FakeInvoicingService()
    assert service.account.documents.list_body([], fmt) == dump_list([], fmt, Invoice)


def test_the_specification_shape_is_a_switch_away() -> None:
    """`real_shape=False`: the documents hold the specified fields only."""
    service = FakeInvoicingService(invoices=5, seed=3, real_shape=False)
    assert_fresh(service.account)
    invoice = service.account.invoices[1]
    for fmt in FORMATS:
        assert service.account.documents.document(invoice, fmt) == dump_model(
            invoice, fmt, mode="document"
        )


@pytest.mark.parametrize("fmt", FORMATS)
async def test_invoices_come_in_the_real_services_shape(fmt: Format) -> None:
    """The field notes' fields beyond the specification, on invoices, lines and payments,
    reach `extra` through the client; without the switch, nothing does."""
    async with FakeInvoicingService(invoices=30, seed=3) as service:
        paid = next(i for i in service.account.invoices.values() if i.payments)
        async with service.client(format=fmt) as client:
            invoice = await client.invoices.get(paid.id or 0)
            listed = await client.invoices.list()
    assert set(invoice.extra) == {
        "tax_components",
        "sender_address",
        "attachments",
        "sepa_active",
        "sent_at",
        "transactions",
    }
    assert invoice.extra["sepa_active"] is False
    assert invoice.extra["attachments"] == []
    assert len(invoice.extra["tax_components"]) >= 1
    assert set(invoice.details[0].extra) == {"tax", "amount_plain"}
    line = invoice.details[0]
    tax = Decimal(str(line.extra["tax"]))
    assert tax == (line.total_price_incl_tax or 0) - (line.total_price_excl_tax or 0)
    assert set(invoice.payments[0].extra) == {"price_base"}
    assert all(i.extra and all(d.extra for d in i.details) for i in listed)
    async with (
        FakeInvoicingService(invoices=3, seed=3, real_shape=False) as spec,
        spec.client(format=fmt) as client,
    ):
        plain = await client.invoices.list()
    assert [i.extra for i in plain] == [{}, {}, {}]
    assert all(d.extra == {} for i in plain for d in i.details)
