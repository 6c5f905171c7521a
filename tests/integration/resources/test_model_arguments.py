"""Methods that name an invoice or a template take its id or the model itself.

Model fields are all `X | None`, so `get(created.id)` does not type-check; `get(created)`
does, and a model that never came from the service is refused before anything is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._models.payloads import dump_model
from invoicing_async.testing._writers import dump_list
from tests.scripted import ScriptedAPI

API = "/api/v1.0"
INVOICE = m.Invoice(id=42, state="open", contact_id=7)
TEMPLATE = m.RecurringTemplate(id=8, contact_id=7, frequency=1, frequency_type=2)
PAYMENT = m.InvoicePayment(payment_method="cash", price=Decimal("1.00"))

Call = Callable[[ia.InvoicingClient, Any], Awaitable[Any]]
# (name, call taking the invoice or template, method, path)
CALLS: list[tuple[str, Call, str, str]] = [
    ("get", lambda c, i: c.invoices.get(i), "GET", "/invoices/42.xml"),
    ("update", lambda c, i: c.invoices.update(i, po_number="PO-1"), "PUT", "/invoices/42.xml"),
    (
        "send invoice",
        lambda c, i: c.invoices.send_invoice(
            i, email="a@example.com", invoice_email="Hi", send_method="hand"
        ),
        "PUT",
        "/invoices/42/send_invoice.xml",
    ),
    (
        "send reminder",
        lambda c, i: c.invoices.send_reminder(
            i, email="a@example.com", invoice_email="Hi", send_method="email"
        ),
        "PUT",
        "/invoices/42/send_reminder.xml",
    ),
    (
        "register payment",
        lambda c, i: c.invoices.register_payment(i, PAYMENT),
        "POST",
        "/invoices/42/payments.xml",
    ),
    ("delete", lambda c, i: c.invoices.delete(i), "DELETE", "/invoices/42.xml"),
    (
        "sync fetch",
        lambda c, i: c.invoices.sync_fetch_ids([i, 42]),
        "POST",
        "/invoices/sync_fetch_ids.xml",
    ),
]
TEMPLATE_CALLS: list[tuple[str, Call, str, str]] = [
    (
        "template get",
        lambda c, t: c.recurring_templates.get(t),
        "GET",
        "/recurring_templates/8.xml",
    ),
    (
        "template update",
        lambda c, t: c.recurring_templates.update(t, frequency=2),
        "PUT",
        "/recurring_templates/8.xml",
    ),
    (
        "template delete",
        lambda c, t: c.recurring_templates.delete(t),
        "DELETE",
        "/recurring_templates/8.xml",
    ),
]


def client_of(server: ScriptedAPI) -> ia.InvoicingClient:
    return ia.InvoicingClient(
        server.url,
        auth=ia.BasicAuth("api-user", "s3cret-pw"),
        budget=ia.RateBudget(limit=100_000),
        retry=ia.RetryPolicy.none(),
    )


def answer(path: str) -> bytes:
    if "sync_fetch" in path:
        return dump_list([INVOICE], "xml", m.Invoice)
    return dump_model(TEMPLATE if "recurring" in path else INVOICE, "xml", mode="document")


@pytest.mark.parametrize(
    ("name", "call", "method", "path", "model"),
    [(*c, INVOICE) for c in CALLS] + [(*c, TEMPLATE) for c in TEMPLATE_CALLS],
    ids=[c[0] for c in CALLS + TEMPLATE_CALLS],
)
async def test_the_model_and_its_id_name_the_same_resource(
    scripted: ScriptedAPI, name: str, call: Call, method: str, path: str, model: m.Model
) -> None:
    scripted.reply(method, API + path, 200, answer(path), times=2)
    async with client_of(scripted) as client:
        by_model = await call(client, model)
        by_id = await call(client, 42 if model is INVOICE else 8)
    assert by_model == by_id
    assert [(s.method, s.path) for s in scripted.seen] == [(method, API + path)] * 2
    assert scripted.seen[0].body == scripted.seen[1].body


@pytest.mark.parametrize(
    ("name", "call", "model"),
    [(c[0], c[1], m.Invoice(contact_id=7)) for c in CALLS]
    + [(c[0], c[1], m.RecurringTemplate(contact_id=7)) for c in TEMPLATE_CALLS],
    ids=[c[0] for c in CALLS + TEMPLATE_CALLS],
)
async def test_a_model_without_id_is_refused_before_sending(
    scripted: ScriptedAPI, name: str, call: Call, model: m.Model
) -> None:
    async with client_of(scripted) as client:
        with pytest.raises(ValueError, match=f"this {type(model).__name__} has no id"):
            await call(client, model)
        assert client.requests_sent == 0
    assert scripted.seen == []


async def test_something_else_is_a_type_error(scripted: ScriptedAPI) -> None:
    async with client_of(scripted) as client:
        with pytest.raises(
            TypeError, match=r"expected Invoice or an id \(int\), got InvoicePayment"
        ):
            await client.invoices.get(PAYMENT)  # type: ignore[arg-type]
    assert scripted.seen == []


async def test_update_accepts_the_attributes_named_like_its_argument(
    scripted: ScriptedAPI,
) -> None:
    """`invoice_id` is an attribute of invoices (their number) and `template_id` one of
    templates: the id argument is positional so that both can be changed."""
    scripted.reply("PUT", API + "/invoices/42.xml", 200, answer("/invoices/42.xml"))
    scripted.reply("PUT", API + "/recurring_templates/8.xml", 200, answer("/recurring_templates"))
    async with client_of(scripted) as client:
        await client.invoices.update(INVOICE, invoice_id="2014-0100")
        await client.recurring_templates.update(TEMPLATE, template_id=3)
    assert b"<invoice-id>2014-0100</invoice-id>" in scripted.seen[0].body
    assert b'<template-id type="integer">3</template-id>' in scripted.seen[1].body
