"""Keyed writes against the fake service, in both formats, under each fault that applies a
write and loses its answer: one effect on the service per key, and the same answer."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async.testing import FakeInvoicingService, FaultPlan

FORMATS: list[ia.Format] = ["xml", "json"]
RETRY = ia.RetryPolicy(attempts=4, base_delay=0.0, max_delay=0.0, jitter=False)


def invoice() -> m.Invoice:
    return m.Invoice(
        contact_id=7,
        details=[m.InvoiceDetail(description="Work", tax_rate_id=1, price=Decimal(10))],
    )


def payment() -> m.InvoicePayment:
    return m.InvoicePayment(price=Decimal("12.10"), payment_method="bank_transfer")


FAULTS: dict[str, Callable[[], FaultPlan]] = {
    "applied, then dropped": lambda: FaultPlan(applied_drop_rate=1.0),
    "applied, then 500": lambda: FaultPlan(applied_error_rate=1.0),
    "applied, then held": lambda: FaultPlan(applied_timeout_rate=1.0, timeout_delay=1.0),
    "dropped before applying": lambda: FaultPlan(
        drop_rate=0.3, seed=4, only_paths=("payments", "send_", "invoices.xml")
    ),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fault", list(FAULTS))
async def test_each_write_applies_once_under_faults(fmt: ia.Format, fault: str) -> None:
    async with FakeInvoicingService(limit=100_000) as service:
        account = service.account
        async with service.client(format=fmt, timeout=0.3, retry=RETRY) as client:
            seeded = await client.invoices.create(invoice())  # the journal's first create
            account.faults = FAULTS[fault]()
            made = await client.invoices.create(invoice(), idempotency_key="order-1")
            sent = await client.invoices.send_invoice(
                made, send_method="email", idempotency_key="send-1"
            )
            reminded = await client.invoices.send_reminder(
                made, send_method="email", idempotency_key="remind-1"
            )
            paid = await client.invoices.register_payment(made, payment(), idempotency_key="pay-1")
            account.faults = FaultPlan()
            before = len(account.requests)
            # The same keys again: the same answers, nothing sent.
            assert await client.invoices.create(invoice(), idempotency_key="order-1") == made
            again = await client.invoices.send_invoice(
                made, send_method="email", idempotency_key="send-1"
            )
            assert again == sent
            assert len(account.requests) == before
        assert made.po_number == "order-1"
        assert made.id != seeded.id
        assert account.created_per_marker["order-1"] == 1
        assert sent.state == "open"
        assert account.sends_per_invoice[made.id or 0] == 1
        assert account.reminders_per_invoice[made.id or 0] == 1
        assert reminded.id == made.id
        assert account.payments_per_invoice[made.id or 0] == 1
        assert paid.total_paid == Decimal("12.10")


@pytest.mark.parametrize("fmt", FORMATS)
async def test_a_settled_create_costs_at_most_two_requests(fmt: ia.Format) -> None:
    async with (
        FakeInvoicingService(invoices=150, limit=100_000) as service,
        service.client(format=fmt, retry=RETRY) as client,
    ):
        await client.invoices.create(invoice(), idempotency_key="first")
        service.account.faults = FaultPlan(applied_error_rate=1.0)
        sent = client.requests_sent
        made = await client.invoices.create(invoice(), idempotency_key="second")
        assert client.requests_sent - sent == 1 + 2  # the create, the list, one fetch
        service.account.faults = FaultPlan(applied_error_rate=1.0)
        sent = client.requests_sent
        await client.invoices.send_invoice(made, send_method="hand", idempotency_key="s")
        assert client.requests_sent - sent == 1 + 1  # the send, one GET
    assert service.account.created_per_marker["second"] == 1


async def test_a_write_that_succeeds_costs_no_extra_request() -> None:
    async with (
        FakeInvoicingService(limit=100_000) as service,
        service.client(format="json") as client,
    ):
        sent = client.requests_sent
        made = await client.invoices.create(invoice(), idempotency_key="k")
        await client.invoices.send_invoice(made, send_method="hand", idempotency_key="s")
        await client.invoices.register_payment(made, payment(), idempotency_key="p")
        assert client.requests_sent - sent == 3


async def test_a_key_used_for_another_request_is_refused_before_sending() -> None:
    async with (
        FakeInvoicingService(limit=100_000) as service,
        service.client(format="json") as client,
    ):
        made = await client.invoices.create(invoice(), idempotency_key="k")
        sent = client.requests_sent
        other = m.Invoice(contact_id=8, details=invoice().details)
        with pytest.raises(ia.IdempotencyKeyError, match="another request"):
            await client.invoices.create(other, idempotency_key="k")
        with pytest.raises(ia.IdempotencyKeyError, match="another request"):
            await client.invoices.send_invoice(made, send_method="hand", idempotency_key="k")
        with pytest.raises(ia.IdempotencyKeyError, match="at most 255"):
            await client.invoices.create(invoice(), idempotency_key="x" * 256)
        with pytest.raises(ia.IdempotencyKeyError, match="po_number"):
            await client.invoices.create(
                m.Invoice(contact_id=7, po_number="mine", details=invoice().details),
                idempotency_key="k2",
            )
        assert client.requests_sent == sent
    assert service.account.created_per_marker["k"] == 1


async def test_a_write_refused_by_the_service_frees_its_key() -> None:
    async with (
        FakeInvoicingService(limit=100_000) as service,
        service.client(format="json", validate=False) as client,
    ):
        bad = m.Invoice(contact_id=7, details=[])
        with pytest.raises(ia.ValidationError):
            await client.invoices.create(bad, idempotency_key="k")
        made = await client.invoices.create(
            bad.__class__(contact_id=7, details=invoice().details), idempotency_key="k2"
        )
        assert made.po_number == "k2"


async def test_a_write_not_applied_is_sent_once_more() -> None:
    """Dropped before it was applied: the look finds nothing, the write goes again."""
    async with (
        FakeInvoicingService(limit=100_000) as service,
        service.client(format="xml", retry=RETRY) as client,
    ):
        await client.invoices.create(invoice(), idempotency_key="first")
        # seed 1: the first roll drops, the second does not
        service.account.faults = FaultPlan(drop_rate=0.5, seed=1, only_paths=("/invoices.xml",))
        made = await client.invoices.create(invoice(), idempotency_key="second")
        assert client._writes.counts.resent == 1  # noqa: SLF001
    assert made.po_number == "second"
    assert service.account.created_per_marker["second"] == 1
    assert service.account.counters["dropped"] == 1


async def test_a_template_create_applies_once() -> None:
    async with (
        FakeInvoicingService(limit=100_000) as service,
        service.client(format="json", retry=RETRY) as client,
    ):
        service.account.faults = FaultPlan(applied_error_rate=1.0)
        template = m.RecurringTemplate(
            contact_id=7,
            frequency=1,
            frequency_type=2,
            details=[m.RecurringTemplateDetail(description="Hosting", tax_rate_id=1)],
        )
        made = await client.recurring_templates.create(template, idempotency_key="t")
        service.account.faults = FaultPlan()
        assert await client.recurring_templates.create(template, idempotency_key="t") == made
    assert len(service.account.templates) == 1


async def test_an_unreachable_journal_fails_closed(tmp_path: Path) -> None:
    async with FakeInvoicingService(limit=100_000) as service:
        journal = f"sqlite:///{tmp_path}/missing/dir/writes.sqlite3"
        async with service.client(format="json", journal=journal) as client:
            with pytest.raises(ia.JournalError, match="nothing was sent"):
                await client.invoices.create(invoice(), idempotency_key="k")
            assert client.requests_sent == 0
            await client.invoices.create(invoice())  # unkeyed writes do not need it


async def test_a_corrupt_journal_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "writes.sqlite3"
    path.write_bytes(b"this is not a database" * 200)
    async with (
        FakeInvoicingService(limit=100_000) as service,
        service.client(format="json", journal=f"sqlite:///{path}") as client,
    ):
        with pytest.raises(ia.JournalError, match="corrupt"):
            await client.invoices.create(invoice(), idempotency_key="k")
        assert client.requests_sent == 0


async def test_the_sqlite_journal_survives_a_new_client(tmp_path: Path) -> None:
    journal = f"sqlite:///{tmp_path / 'writes.sqlite3'}"
    async with (
        FakeInvoicingService(limit=100_000) as service,
        service.client(format="json", journal=journal) as client,
    ):
        made = await client.invoices.create(invoice(), idempotency_key="k")
        async with service.client(format="json", journal=journal) as client:
            sent = client.requests_sent
            assert await client.invoices.create(invoice(), idempotency_key="k") == made
            assert client.requests_sent == sent
            assert await client.resolve_pending_writes() == {}


async def test_an_unkeyed_send_whose_answer_is_lost_is_not_sent_again() -> None:
    """aiohttp repeats a PUT on a dropped keep-alive connection by itself: not ours."""
    async with (
        FakeInvoicingService(limit=100_000) as service,
        service.client(format="json") as client,
    ):
        made = await client.invoices.create(invoice())  # the connection is kept alive
        service.account.faults = FaultPlan(applied_drop_rate=1.0)
        with pytest.raises(ia.APIConnectionError):
            await client.invoices.send_invoice(made, send_method="email")
    assert service.account.sends_per_invoice[made.id or 0] == 1
