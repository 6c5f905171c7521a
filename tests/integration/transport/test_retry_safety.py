"""Which requests are sent again after a 5xx or a lost answer: an update that only sets
attributes is (as a GET), one that adds or deletes a line, a send, a reminder and a
payment never are once the service may have acted (issue 24, point 7)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._models.payloads import Format, dump_model
from invoicing_async._resources.base import sets_attributes_only
from invoicing_async._transport.retry import is_repeatable
from invoicing_async.errors import APITimeoutError
from invoicing_async.testing import (
    FakeInvoicingService,
    FaultPlan,
    MockSender,
    OutgoingRequest,
    RawResponse,
    SendError,
    mock_response,
)

pytestmark = pytest.mark.slow  # 15 s of CPU for the module

RETRY = ia.RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0)
LINE = m.InvoiceDetail(description="Work", price=Decimal("60.50"), tax_rate_id=1)


# -- the decision, pure ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "idempotent", "repeatable"),
    [
        ("GET", False, True),
        ("HEAD", False, True),
        ("DELETE", False, True),
        ("PUT", False, False),
        ("PUT", True, True),
        ("POST", False, False),
        ("POST", True, False),  # a POST creates: never repeatable, whatever the caller says
    ],
)
def test_what_may_be_sent_again(method: str, idempotent: bool, repeatable: bool) -> None:
    assert is_repeatable(method, idempotent=idempotent) is repeatable
    policy = ia.RetryPolicy()
    assert policy.retries_status(method, 503, idempotent=idempotent) is repeatable
    assert policy.retries_status(method, 422, idempotent=idempotent) is False
    assert policy.retries_error(method, connected=True, idempotent=idempotent) is repeatable
    assert policy.retries_error(method, connected=False, idempotent=idempotent) is True


@pytest.mark.parametrize(
    ("changes", "only_attributes"),
    [
        ({}, True),
        ({"po_number": "PO-9", "attention": None}, True),
        ({"details": None}, True),
        ({"details": [m.InvoiceDetail(id=5, price=Decimal("1.10"))]}, True),
        ({"frequency": 2, "send_invoice": True}, True),  # a template attribute, not a send
        ({"details": [m.RecurringTemplateDetail(id=5, description="x")]}, True),
        ({"po_number": "x", "details": [m.InvoiceDetail(description="New", tax_rate_id=1)]}, False),
        ({"details": [m.InvoiceDetail(id=5, destroy=True)]}, False),
        ({"details": [m.RecurringTemplateDetail(description="New", tax_rate_id=1)]}, False),
    ],
)
def test_an_update_that_only_sets_attributes(
    changes: dict[str, Any], only_attributes: bool
) -> None:
    assert sets_attributes_only(changes) is only_attributes


# -- against the fake: its injected 500s come before the operation -----------------------------

Call = Callable[[ia.InvoicingClient, m.Invoice, m.RecurringTemplate], Awaitable[object]]
CALLS: list[tuple[str, Call, int]] = [
    ("set attributes", lambda c, i, _t: c.invoices.update(i, po_number="PO-9"), 3),
    (
        "change a line by id",
        lambda c, i, _t: c.invoices.update(
            i, details=[m.InvoiceDetail(id=i.details[0].id, price=Decimal("70"))]
        ),
        3,
    ),
    (
        "template attributes",
        lambda c, _i, t: c.recurring_templates.update(t, frequency=2, send_invoice=True),
        3,
    ),
    ("add a line", lambda c, i, _t: c.invoices.update(i, details=[LINE]), 1),
    (
        "delete a line",
        lambda c, i, _t: c.invoices.update(
            i, details=[m.InvoiceDetail(id=i.details[0].id, destroy=True)]
        ),
        1,
    ),
    (
        "add a template line",
        lambda c, _i, t: c.recurring_templates.update(
            t, details=[m.RecurringTemplateDetail(description="More", tax_rate_id=1)]
        ),
        1,
    ),
    ("send invoice", lambda c, i, _t: c.invoices.send_invoice(i, send_method="hand"), 1),
    ("send reminder", lambda c, i, _t: c.invoices.send_reminder(i, send_method="email"), 1),
    (
        "register payment",
        lambda c, i, _t: c.invoices.register_payment(
            i, m.InvoicePayment(payment_method="cash", price=Decimal("1"))
        ),
        1,
    ),
]


@pytest.mark.parametrize(("name", "call", "sent"), CALLS, ids=[c[0] for c in CALLS])
async def test_after_a_500_only_what_only_sets_attributes_is_sent_again(
    service: FakeInvoicingService, fmt: str, name: str, call: Call, sent: int
) -> None:
    account = service.account
    invoice = account.create_invoice(m.Invoice(contact_id=7, details=[LINE]))
    account.send_invoice(invoice.id or 0, {"send_method": "hand"}, reminder=False)
    template = account.create_template(
        m.RecurringTemplate(
            contact_id=7,
            frequency_type=2,
            details=[m.RecurringTemplateDetail(description="Hosting", tax_rate_id=1)],
        )
    )
    account.faults = FaultPlan(error_rate=1.0, only_paths=("/invoices/1", "/recurring_templates/1"))
    async with service.client(format=fmt, retry=RETRY) as client:
        with pytest.raises(ia.ServerError):
            await call(client, invoice, template)
    assert len(account.requests) == sent
    assert account.counters["500"] == sent


async def test_a_retried_update_succeeds_once_the_service_recovers(
    service: FakeInvoicingService, fmt: str
) -> None:
    account = service.account
    invoice = account.create_invoice(m.Invoice(contact_id=7, details=[LINE]))
    # Seed 1 rolls 0.13 then 0.85: the first PUT gets a 500, the second goes through.
    account.faults = FaultPlan(error_rate=0.5, seed=1)
    async with service.client(format=fmt, retry=RETRY) as client:
        changed = await client.invoices.update(invoice, po_number="PO-9")
    assert changed.po_number == "PO-9"
    assert [(r.method, r.status) for r in account.requests] == [("PUT", 500), ("PUT", 200)]


# -- 503 and lost answers, with MockSender ----------------------------------------------------


def flaky(fmt: Format, first: Callable[[OutgoingRequest], RawResponse]) -> MockSender:
    """A sender whose first answer is `first(request)`, and every later one the invoice."""
    seen: list[OutgoingRequest] = []

    def answer(request: OutgoingRequest) -> RawResponse:
        seen.append(request)
        if len(seen) == 1:
            return first(request)
        return mock_response(200, dump_model(m.Invoice(id=1), fmt, mode="document"))

    return MockSender(answer)


def unavailable(_request: OutgoingRequest) -> RawResponse:
    return mock_response(503, b"Service Unavailable")


def timed_out(request: OutgoingRequest) -> RawResponse:
    error = APITimeoutError("timed out", method=request.method, url=str(request.url))
    raise SendError(error, connected=True)


@pytest.mark.parametrize("first", [unavailable, timed_out])
@pytest.mark.parametrize(
    ("changes", "sent"),
    [
        ({"po_number": "PO-9", "invoice_date": dt.date(2026, 11, 24)}, 2),
        ({"details": [LINE]}, 1),
    ],
    ids=["attributes", "new line"],
)
async def test_a_503_or_a_lost_answer(
    fmt: str,
    first: Callable[[OutgoingRequest], RawResponse],
    changes: dict[str, Any],
    sent: int,
) -> None:
    wire: Format = "json" if fmt == "json" else "xml"
    sender = flaky(wire, first)
    async with ia.InvoicingClient(
        "https://acme.example.com",
        auth=ia.BasicAuth("api-user", "pw"),
        format=wire,
        sender=sender,
        retry=RETRY,
        budget=ia.RateBudget(limit=1000),
    ) as client:
        if sent == 1:
            with pytest.raises((ia.ServerError, APITimeoutError)):
                await client.invoices.update(1, **changes)
        else:
            assert (await client.invoices.update(1, **changes)).id == 1
    assert [r.method for r in sender.requests] == ["PUT"] * sent
    assert len({r.body for r in sender.requests}) == 1  # the same request, again
