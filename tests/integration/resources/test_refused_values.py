"""Values a request cannot carry are refused before sending, named by their place."""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async.testing import FakeInvoicingService
from tests.scripted import ScriptedAPI, scripted_client

Call = Callable[[ia.InvoicingClient], Awaitable[Any]]


def line(**kwargs: Any) -> m.InvoiceDetail:
    return m.InvoiceDetail(description="Work", tax_rate_id=1, **kwargs)


CASES: list[tuple[str, Call, str, str]] = [
    (
        "float money",
        lambda c: c.invoices.create(m.Invoice(contact_id=1, details=[line(price=60.5)])),
        "price",
        "float",
    ),
    ("NaN", lambda c: c.invoices.update(1, discount=Decimal("NaN")), "discount", "finite"),
    (
        "infinity",
        lambda c: c.invoices.update(1, details=[line(price=Decimal("-Infinity"))]),
        "price",
        "finite",
    ),
    (
        "naive datetime",
        lambda c: c.invoices.advanced_filter({"updated_since": dt.datetime(2014, 7, 30, 12, 0)}),
        "updated_since",
        "naive",
    ),
    ("NUL", lambda c: c.invoices.update(1, po_number="PO\x009"), "po", "XML 1.0"),
    (
        "vertical tab",
        lambda c: c.invoices.update(1, details=[line(amount="1\x0bx")]),
        "amount",
        "XML 1.0",
    ),
    (
        "escape",
        lambda c: c.invoices.send_invoice(
            1, email="a@example.com", invoice_email="Hi \x1b[31m", send_method="email"
        ),
        "invoice",
        "XML 1.0",
    ),
    ("U+FFFE", lambda c: c.invoices.update(1, description="a\ufffeb"), "description", "XML 1.0"),
    (
        "lone surrogate",
        lambda c: c.invoices.update(1, description="a\ud800b"),
        "description",
        "surrogate",
    ),
]


@pytest.mark.parametrize(("name", "call", "where", "why"), CASES, ids=[c[0] for c in CASES])
async def test_refused_before_sending(name: str, call: Call, where: str, why: str) -> None:
    api = ScriptedAPI()
    async with scripted_client(api, "xml") as client:
        with pytest.raises(ia.ValidationError) as info:
            await call(client)
    assert api.seen == []
    assert info.value.status == 0
    # The error names the call it refused, as a check before sending does.
    assert info.value.method in ("POST", "PUT")
    assert info.value.url.startswith("/invoices")
    assert str(info.value).startswith(f"{info.value.method} {info.value.url}: not sent")
    (error,) = info.value.errors
    assert where in (error.attribute or "")
    assert why in error.message


async def test_control_characters_pass_in_json_but_surrogates_do_not() -> None:
    api = ScriptedAPI()
    api.reply("PUT", "/api/v1.0/invoices/1.xml", 200, b'{"invoice": {"id": 1}}')
    async with scripted_client(api, "json") as client:
        await client.invoices.update(1, po_number="PO\x0b9")
        with pytest.raises(ia.ValidationError, match="surrogate"):
            await client.invoices.update(1, po_number="PO\udc009")
    assert len(api.seen) == 1


@pytest.mark.parametrize("fmt", ["xml", "json"])
async def test_carriage_returns_survive_the_round_trip(fmt: str) -> None:
    async with FakeInvoicingService(invoices=0) as service, service.client(format=fmt) as client:
        text = "Line one\r\nLine two\rthree\n"
        created = await client.invoices.create(
            m.Invoice(contact_id=1, description=text, details=[line(amount="2\r\nhours")])
        )
        again = await client.invoices.get(created)
    assert again.description == text
    assert again.details[0].amount == "2\r\nhours"
