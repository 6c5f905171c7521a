"""Register payment returns the invoice, whichever way the service answered.

The real service answered `POST /invoices/:id/payments` with the whole invoice; older
answers (and the fake service, for a while) were the payment, or no body. The invoice
is fetched only then: one more request.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._models.payloads import Format, dump_model
from tests.scripted import ScriptedAPI

API = "/api/v1.0"
PAID = m.Invoice(
    id=42,
    invoice_id="2014-0096",
    state=m.InvoiceState.PAID,
    revision=1406734500,
    total_paid=Decimal("60.50"),
    total_unpaid=Decimal("0.00"),
    payments=[m.InvoicePayment(id=3, price=Decimal("60.50"), payment_method="bank_transfer")],
)
PAYMENT = m.InvoicePayment(
    payment_date=dt.date(2014, 7, 31),
    payment_method="bank_transfer",
    price=Decimal("60.50"),
    send_email=False,
)
FORMATS: list[Format] = ["xml", "json"]


def client_of(server: ScriptedAPI, fmt: Format) -> ia.InvoicingClient:
    return ia.InvoicingClient(
        server.url,
        auth=ia.BasicAuth("api-user", "s3cret-pw"),
        format=fmt,
        budget=ia.RateBudget(limit=100_000),
        retry=ia.RetryPolicy(attempts=1),
    )


def document(model: m.Model, fmt: Format) -> bytes:
    return dump_model(model, fmt, mode="document")


@pytest.mark.parametrize("fmt", FORMATS)
async def test_an_invoice_answer_is_returned_without_another_request(
    scripted: ScriptedAPI, fmt: Format
) -> None:
    scripted.reply("POST", API + "/invoices/42/payments.xml", 201, document(PAID, fmt))
    async with client_of(scripted, fmt) as client:
        paid = await client.invoices.register_payment(m.Invoice(id=42), PAYMENT)
    assert paid == PAID
    assert [(s.method, s.path) for s in scripted.seen] == [
        ("POST", API + "/invoices/42/payments.xml")
    ]


ANSWERS_WITHOUT_THE_INVOICE = [
    ("xml", "payment document", document(m.InvoicePayment(id=3, price=Decimal("60.50")), "xml")),
    ("json", "payment document", document(m.InvoicePayment(id=3, price=Decimal("60.50")), "json")),
    ("xml", "empty body", b""),
    ("json", "empty body", b""),
    ("json", "blank body", b"\n"),
    ("json", "bare object", b'{"id": 3, "price": "60.50"}'),
]


@pytest.mark.parametrize(
    ("fmt", "shape", "body"),
    ANSWERS_WITHOUT_THE_INVOICE,
    ids=[f"{fmt}-{shape}" for fmt, shape, _ in ANSWERS_WITHOUT_THE_INVOICE],
)
async def test_other_answers_fetch_the_invoice_once(
    scripted: ScriptedAPI, fmt: Format, shape: str, body: bytes
) -> None:
    scripted.reply("POST", API + "/invoices/42/payments.xml", 201, body)
    scripted.reply("GET", API + "/invoices/42.xml", 200, document(PAID, fmt))
    async with client_of(scripted, fmt) as client:
        paid = await client.invoices.register_payment(42, PAYMENT)
        assert client.requests_sent == 2
    assert paid == PAID
    assert [(s.method, s.path) for s in scripted.seen] == [
        ("POST", API + "/invoices/42/payments.xml"),
        ("GET", API + "/invoices/42.xml"),
    ]


@pytest.mark.parametrize(
    ("fmt", "body"),
    [("xml", b"<contact><id>1</id></contact>"), ("json", b'{"contact": {"id": 1}}')],
)
async def test_an_unexpected_document_is_a_decode_error(
    scripted: ScriptedAPI, fmt: Format, body: bytes
) -> None:
    scripted.reply("POST", API + "/invoices/42/payments.xml", 201, body)
    async with client_of(scripted, fmt) as client:
        with pytest.raises(ia.DecodeError, match="'invoice' or 'payment' document, got 'contact'"):
            await client.invoices.register_payment(42, PAYMENT)
    assert len(scripted.seen) == 1


async def test_the_payment_is_sent_as_a_payment_document(scripted: ScriptedAPI) -> None:
    scripted.reply("POST", API + "/invoices/42/payments.xml", 201, document(PAID, "json"))
    async with client_of(scripted, "json") as client:
        await client.invoices.register_payment(42, PAYMENT)
    assert scripted.seen[0].body == (
        b'{"payment":{"payment_date":"2014-07-31","payment_method":"bank_transfer",'
        b'"price":"60.50","send_email":false}}'
    )
