"""The fake answers as the real service did where two live-tested clients found it
different (issue 24, `shared/spec/field-notes.md`), and our client accepts what the
service accepted. Each point in XML and JSON: plain aiohttp against the fake for what it
answers, our client against it for what we send and read."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from typing import Any, TypeVar

import aiohttp
import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._models.base import Model
from invoicing_async._models.documents import Format, load_model
from invoicing_async._models.stored import load_invoice_documents
from invoicing_async._wire.xml import decode_xml
from invoicing_async.testing import FakeInvoicingService
from invoicing_async.testing._writers import dump_list

pytestmark = pytest.mark.slow  # 21 s of CPU for the module

API = "/api/v1.0"
HEADERS = {
    "xml": {"Accept": "application/xml", "Content-Type": "application/xml"},
    "json": {"Accept": "application/json", "Content-Type": "application/json"},
}
TIMESTAMP = "2026-11-24T02:24:56+00:00"
M = TypeVar("M", bound=Model)
LINE = m.InvoiceDetail(description="Work", price=Decimal("60.50"), tax_rate_id=1)


def fmt_of(value: str) -> Format:
    assert value in ("xml", "json")
    return "xml" if value == "xml" else "json"


def body(fmt: str, root: str, fields: dict[str, Any]) -> bytes:
    """A request body as a Rails client writes it; in XML, a `(type, text)` value gets a
    `type` attribute, None is `nil="true"`, and a list of dicts is an array of `detail`."""
    if fmt == "json":
        plain = {k: v[1] if isinstance(v, tuple) else v for k, v in fields.items()}
        return json.dumps({root: plain}).encode()
    parts = []
    for key, value in fields.items():
        name = key.replace("_", "-")
        if value is None:
            parts.append(f'<{name} nil="true"/>')
        elif isinstance(value, tuple):
            parts.append(f'<{name} type="{value[0]}">{value[1]}</{name}>')
        elif isinstance(value, list):
            items = "".join(
                "<detail>"
                + "".join(
                    f"<{k.replace('_', '-')}>{v}</{k.replace('_', '-')}>" for k, v in item.items()
                )
                + "</detail>"
                for item in value
            )
            parts.append(f'<{name} type="array">{items}</{name}>')
        else:
            parts.append(f"<{name}>{value}</{name}>")
    tag = root.replace("_", "-")
    return f"<{tag}>{''.join(parts)}</{tag}>".encode()


def root_of(raw: bytes, fmt: str) -> str:
    """The root element (XML) or the wrapping key (JSON) of a one-entity document."""
    if fmt == "xml":
        return decode_xml(raw)[0]
    (name,) = json.loads(raw)
    return str(name)


async def send(
    http: aiohttp.ClientSession,
    method: str,
    path: str,
    fmt: str,
    root: str,
    fields: dict[str, Any],
) -> tuple[int, bytes]:
    """`method` `path` with `fields` written as a Rails client writes them (`body`), in
    `fmt`: the status and the body of the answer."""
    async with http.request(
        method, f"{API}{path}", data=body(fmt, root, fields), headers=HEADERS[fmt]
    ) as resp:
        return resp.status, await resp.read()


async def answer(
    http: aiohttp.ClientSession,
    method: str,
    path: str,
    fmt: str,
    fields: tuple[str, dict[str, Any]],
    model: type[M],
    status: int,
) -> M:
    """`send`, its status checked, the answer read as `model`."""
    got, raw = await send(http, method, path, fmt, *fields)
    assert got == status, raw
    return load_model(raw, fmt_of(fmt), model)


async def open_invoice(client: ia.InvoicingClient) -> m.Invoice:
    created = await client.invoices.create(m.Invoice(contact_id=7, details=[LINE]))
    return await client.invoices.send_invoice(
        created, email="a@example.com", invoice_email="Hi", send_method="email"
    )


# -- 1. register payment answers with the updated invoice ------------------------------------


@pytest.mark.parametrize(("price", "state"), [("73.21", "paid"), ("80.00", "open")])
async def test_register_payment_answers_201_with_the_updated_invoice(
    http: aiohttp.ClientSession, client: ia.InvoicingClient, fmt: str, price: str, state: str
) -> None:
    invoice = await open_invoice(client)
    payment = {"payment_method": "bank_transfer", "price": price, "payment_date": "2026-11-24"}
    status, raw = await send(
        http, "POST", f"/invoices/{invoice.id}/payments.xml", fmt, "payment", payment
    )
    assert status == 201
    assert root_of(raw, fmt) == "invoice"
    paid = load_model(raw, fmt_of(fmt), m.Invoice)
    assert paid.id == invoice.id
    assert paid.total_paid == Decimal(price)
    assert paid.total_unpaid == Decimal("73.21") - Decimal(price)  # overpaid: negative
    assert paid.state == state  # overpaid stays open, as the service left it
    assert [p.price for p in paid.payments] == [Decimal(price)]


async def test_register_payment_takes_one_request(
    client: ia.InvoicingClient, service: FakeInvoicingService
) -> None:
    invoice = await open_invoice(client)
    before = client.requests_sent
    paid = await client.invoices.register_payment(
        invoice,
        m.InvoicePayment(
            payment_date=dt.date(2026, 11, 24),
            payment_method="bank_transfer",
            price=invoice.total_unpaid,
            send_email=False,
        ),
    )
    assert client.requests_sent == before + 1  # built from the answer, no GET after it
    assert service.account.requests[-1].method == "POST"
    assert paid.state == "paid"
    assert paid.total_paid == Decimal("73.21")
    assert paid == await client.invoices.get(invoice)


# -- 2. timestamps for Date attributes: the date part is kept --------------------------------

DATE_VALUES = [
    TIMESTAMP,
    ("date", TIMESTAMP),
    ("datetime", TIMESTAMP),
    "2026-11-24T23:30:00-05:00",  # the date as written, not moved to UTC
    "2026-11-24T02:24:56Z",
]


async def pay_on(
    http: aiohttp.ClientSession, fmt: str, invoice_id: int | None, payment_date: object
) -> tuple[int, bytes]:
    """POST a cash payment of 10.00 dated `payment_date` as written: status and body."""
    payment = {"payment_method": "cash", "price": "10.00", "payment_date": payment_date}
    return await send(http, "POST", f"/invoices/{invoice_id}/payments.xml", fmt, "payment", payment)


async def test_payment_date_given_as_a_timestamp_keeps_its_date(
    http: aiohttp.ClientSession, client: ia.InvoicingClient, fmt: str
) -> None:
    invoice = await open_invoice(client)
    for value in DATE_VALUES:
        status, text = await pay_on(http, fmt, invoice.id, value)
        assert status == 201, text
        answer = load_model(text, fmt_of(fmt), m.Invoice)
        assert answer.payments[-1].payment_date == dt.date(2026, 11, 24), value


async def test_invoice_and_template_dates_given_as_timestamps(
    http: aiohttp.ClientSession, service: FakeInvoicingService, fmt: str
) -> None:
    service.clock.set(dt.datetime(2026, 11, 20, 12, tzinfo=dt.timezone.utc))
    line = [{"description": "Work", "price": "10", "tax_rate_id": "1"}]
    invoice = {"contact_id": 7, "invoice_date": TIMESTAMP, "details_attributes": line}
    created = await answer(http, "POST", "/invoices.xml", fmt, ("invoice", invoice), m.Invoice, 201)
    assert created.invoice_date == dt.date(2026, 11, 24)
    template = {
        "contact_id": 7,
        "frequency": 1,
        "frequency_type": 2,
        "start_date": "2026-12-01T00:30:00+02:00",
        "details_attributes": line,
    }
    made = await answer(
        http,
        "POST",
        "/recurring_templates.xml",
        fmt,
        ("recurring_template", template),
        m.RecurringTemplate,
        201,
    )
    assert made.start_date == dt.date(2026, 12, 1)
    update = {"invoice_date": ("date", "2026-11-25T08:00:00Z")}
    path = f"/invoices/{created.id}.xml"
    changed = await answer(http, "PUT", path, fmt, ("invoice", update), m.Invoice, 200)
    assert changed.invoice_date == dt.date(2026, 11, 25)


NOT_DATES = [
    "2026-11-24T٠2:24:56+00:00",  # an Arabic-Indic digit
    "٢٠٢٦-11-24T02:24:56+00:00",
    "2026-11-24Tnoon",
    "2026-11-24 and more",
    "2026-13-24T02:24:56+00:00",
    "2026-11-24T25:00:00+00:00",
]


async def test_what_is_no_timestamp_is_still_refused(
    http: aiohttp.ClientSession, client: ia.InvoicingClient, fmt: str
) -> None:
    invoice = await open_invoice(client)
    for value in NOT_DATES:
        status, text = await pay_on(http, fmt, invoice.id, value)
        assert status == 422, value
        assert b"not a date" in text


def test_our_decoder_reads_a_date_attribute_sent_as_a_timestamp(fmt: str) -> None:
    if fmt == "xml":
        document = (
            b'<invoice><id type="integer">1</id>'
            b'<invoice-date type="date">2014-07-31T12:00:00+02:00</invoice-date>'
            b'<payments type="array"><payment>'
            b"<payment-date>2014-08-01T23:59:59-10:00</payment-date>"
            b"</payment></payments></invoice>"
        )
    else:
        document = json.dumps(
            {
                "invoice": {
                    "id": 1,
                    "invoice_date": "2014-07-31T12:00:00+02:00",
                    "payments": [{"payment_date": "2014-08-01T23:59:59-10:00"}],
                }
            }
        ).encode()
    invoice = load_model(document, fmt_of(fmt), m.Invoice)
    assert invoice.invoice_date == dt.date(2014, 7, 31)
    assert [p.payment_date for p in invoice.payments] == [dt.date(2014, 8, 1)]
    bad = document.replace(b"2014-07-31T12", "2014-07-31T١2".encode())
    with pytest.raises(ia.DecodeError, match="not a date"):
        load_model(bad, fmt_of(fmt), m.Invoice)


def test_a_sync_fetch_reply_with_timestamp_dates_is_read(fmt: str) -> None:
    """The sync's own path (members checked in C for JSON) reads them as the converter does."""
    invoice = m.Invoice(id=1, revision=5, invoice_date=dt.date(2014, 7, 31))
    reply = dump_list([invoice], fmt_of(fmt), m.Invoice).replace(
        b"2014-07-31", b"2014-07-31T12:00:00+02:00"
    )
    assert b"2014-07-31T12:00:00+02:00" in reply
    documents, unreadable = load_invoice_documents(reply, fmt_of(fmt), limit=100)
    assert unreadable == []
    assert [d.model().invoice_date for d in documents] == [dt.date(2014, 7, 31)]


# -- 3. HEAD on every GET route ----------------------------------------------------------------

GET_ROUTES = [
    "/invoices",
    "/invoices/1",
    "/invoices/filter/open",
    "/invoices/invoice_id/2026-0001",
    "/invoices/sync_list_ids",
    "/recurring_templates",
    "/recurring_templates/1",
    "/current_session",
]


@pytest.mark.parametrize("ext", [".xml", ".json"])
async def test_head_answers_with_the_gets_status_and_headers_and_no_body(
    http: aiohttp.ClientSession, service: FakeInvoicingService, ext: str
) -> None:
    account = service.account
    service.clock.set(dt.datetime(2026, 11, 20, 12, tzinfo=dt.timezone.utc))
    invoice = account.create_invoice(m.Invoice(contact_id=7, details=[LINE]))
    account.send_invoice(invoice.id or 0, {"send_method": "hand"}, reminder=False)
    account.create_template(
        m.RecurringTemplate(
            contact_id=7,
            frequency_type=2,
            details=[m.RecurringTemplateDetail(description="Hosting", tax_rate_id=1)],
        )
    )
    for path in GET_ROUTES:
        url = API + path + ext
        async with http.get(url) as got:
            got_body = await got.read()
        async with http.head(url) as head:
            assert head.status == got.status == 200, path
            assert await head.read() == b"", path
            for name in ("Content-Type", "Content-Length", "X-RateLimit-Limit"):
                assert head.headers.get(name) == got.headers.get(name), (path, name)
        assert int(head.headers["Content-Length"]) == len(got_body) > 0, path
        assert account.requests[-1].method == "HEAD"


@pytest.mark.parametrize("path", ["/invoices/999.xml", "/recurring_templates/999.json"])
async def test_head_of_what_is_missing_is_a_404_without_body(
    http: aiohttp.ClientSession, path: str
) -> None:
    async with http.head(API + path) as resp:
        assert resp.status == 404
        assert await resp.read() == b""


async def test_head_of_a_long_list_sends_no_body() -> None:
    async with FakeInvoicingService(invoices=250, tls=False) as service:
        auth = {"Authorization": aiohttp.encode_basic_auth(service.username, service.password)}
        async with aiohttp.ClientSession(base_url=service.base_url, headers=auth) as http:
            async with http.head(f"{API}/invoices.xml") as resp:
                assert resp.status == 200
                assert await resp.read() == b""
            async with http.get(f"{API}/invoices.xml") as resp:  # the connection still works
                assert (await resp.read()).count(b"<invoice>") == 250


# -- 4. send_invoice / send_reminder with the send method alone ------------------------------


@pytest.mark.parametrize("method", ["email", "hand", "post"])
@pytest.mark.parametrize("given", ["nil", "absent"])
async def test_send_without_address_takes_the_contacts_and_the_profiles(
    http: aiohttp.ClientSession, client: ia.InvoicingClient, fmt: str, method: str, given: str
) -> None:
    created = await client.invoices.create(m.Invoice(contact_id=7, details=[LINE]))
    fields: dict[str, Any] = {"send_method": method}
    if given == "nil":
        fields.update(email=None, invoice_email=None)
    path = f"/invoices/{created.id}/send_invoice.xml"
    sent = await answer(http, "PUT", path, fmt, ("invoice", fields), m.Invoice, 200)
    assert sent.state == "open"
    assert sent.email == "contact-7@example.com"
    assert sent.invoice_email
    assert sent.history[-1].action == f"invoice_sent_{method}"
    path = f"/invoices/{created.id}/send_reminder.xml"
    reminded = await answer(http, "PUT", path, fmt, ("invoice", fields), m.Invoice, 200)
    assert reminded.history[-1].action == f"invoice_reminder_sent_{method}"


async def test_send_still_needs_a_valid_send_method(
    http: aiohttp.ClientSession, client: ia.InvoicingClient, fmt: str
) -> None:
    created = await client.invoices.create(m.Invoice(contact_id=7, details=[LINE]))
    for fields, attribute in (
        ({"email": "a@example.com"}, "send_method"),
        ({"send_method": "pigeon"}, "send_method"),
    ):
        path = f"/invoices/{created.id}/send_invoice.xml"
        status, raw = await send(http, "PUT", path, fmt, "invoice", fields)
        assert status == 422
        assert attribute in raw.decode()


async def test_our_client_sends_with_the_send_method_alone(
    client: ia.InvoicingClient, service: FakeInvoicingService
) -> None:
    created = await client.invoices.create(m.Invoice(contact_id=7, details=[LINE]))
    sent = await client.invoices.send_invoice(created, send_method="hand")
    assert (sent.state, sent.email) == ("open", "contact-7@example.com")
    sent_body = service.account.requests[-1].body
    assert b"email" not in sent_body  # left out: the service uses its own
    reminded = await client.invoices.send_reminder(sent, send_method=m.SendMethod.POST)
    assert reminded.history[-1].action == "invoice_reminder_sent_post"
    given = await client.invoices.send_reminder(
        sent, send_method="email", email="b@example.com", invoice_email="Please pay"
    )
    assert given.email == "b@example.com"


# -- 5. a recurring template without frequency ---------------------------------------------


async def test_template_without_frequency_gets_frequency_1(
    http: aiohttp.ClientSession, client: ia.InvoicingClient, service: FakeInvoicingService, fmt: str
) -> None:
    fields = {
        "contact_id": 7,
        "frequency_type": 2,
        "details_attributes": [{"description": "Hosting", "tax_rate_id": "1"}],
    }
    made = await answer(
        http,
        "POST",
        "/recurring_templates.xml",
        fmt,
        ("recurring_template", fields),
        m.RecurringTemplate,
        201,
    )
    assert made.frequency == 1
    ours = await client.recurring_templates.create(
        m.RecurringTemplate(
            contact_id=7,
            frequency_type=m.FrequencyType.MONTHLY,
            details=[m.RecurringTemplateDetail(description="Hosting", tax_rate_id=1)],
        )
    )
    assert ours.frequency == 1
    assert service.account.templates[ours.id or 0].frequency == 1


async def test_template_rules_that_stay(http: aiohttp.ClientSession, fmt: str) -> None:
    fields = {"contact_id": 999, "frequency": 0, "details_attributes": []}
    status, raw = await send(
        http, "POST", "/recurring_templates.xml", fmt, "recurring_template", fields
    )
    assert status == 422
    text = raw.decode()
    for attribute in ("contact_id", "frequency", "frequency_type", "details"):
        assert re.search(rf"\b{attribute}\b", text), attribute
