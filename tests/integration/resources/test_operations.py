"""Every operation, in both formats: what goes on the wire, and what comes back.

Requests go through the whole client in memory (`MockSender`); each body is decoded back
with the wire codecs and compared (leaf values as text, names underscored) with what the
specification asks for.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import attrs
import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._models.payloads import dump_model
from invoicing_async._wire.json import decode_json
from invoicing_async._wire.xml import decode_xml
from invoicing_async.testing._writers import dump_list, dump_sync_entries
from tests.scripted import ScriptedAPI, scripted_client

API = "/api/v1.0"


@pytest.fixture
def api() -> ScriptedAPI:
    return ScriptedAPI()


INVOICE = m.Invoice(
    id=42,
    invoice_id="2014-0096",
    state="open",
    revision=1406734421,
    contact_id=7,
    total_price_incl_tax=Decimal("181.50"),
    details=[m.InvoiceDetail(id=5, description="Work", tax_rate_id=1, price=Decimal("60.50"))],
)
PAYMENT = m.InvoicePayment(
    id=3,
    payment_date=dt.date(2014, 7, 31),
    payment_method="bank_transfer",
    price=Decimal("60.50"),
)
TEMPLATE = m.RecurringTemplate(
    id=8,
    contact_id=7,
    frequency=1,
    frequency_type=2,
    details=[m.RecurringTemplateDetail(id=9, description="Hosting", tax_rate_id=1)],
)
FUTURE = dt.date.today() + dt.timedelta(days=30)


def normalized(value: Any) -> Any:
    """Names underscored, scalars as text: the same tree whichever format carried it."""
    if isinstance(value, dict):
        return {k.replace("-", "_"): normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def received(body: bytes, fmt: str) -> tuple[str, Any]:
    if fmt == "xml":
        root, value = decode_xml(body)
        return root.replace("-", "_"), normalized(value)
    ((root, value),) = decode_json(body).items()
    return root, normalized(value)


@attrs.frozen
class Case:
    name: str
    call: Callable[[ia.InvoicingClient], Awaitable[Any]]
    method: str
    path: str
    reply_status: int
    reply: Callable[[str], bytes]
    sent: tuple[str, Any] | None  # (root, body) expected, or None for no body
    check: Callable[[Any], bool]


def doc(model: m.Model) -> Callable[[str], bytes]:
    return lambda fmt: dump_model(model, fmt, mode="document")  # type: ignore[arg-type]


def docs(models: list[Any], cls: type[m.Model]) -> Callable[[str], bytes]:
    return lambda fmt: dump_list(models, fmt, cls)  # type: ignore[arg-type]


CASES = [
    Case(
        "list",
        lambda c: c.invoices.list(),
        "GET",
        "/invoices.xml",
        200,
        docs([INVOICE, INVOICE], m.Invoice),
        None,
        lambda r: [i.id for i in r] == [42, 42],
    ),
    Case(
        "list filtered",
        lambda c: c.invoices.list(filter="this_quarter"),
        "GET",
        "/invoices/filter/this_quarter.xml",
        200,
        docs([INVOICE], m.Invoice),
        None,
        lambda r: r == [INVOICE],
    ),
    Case(
        "list saved filter",
        lambda c: c.invoices.list(filter=12),
        "GET",
        "/invoices/filter/12.xml",
        200,
        docs([], m.Invoice),
        None,
        lambda r: r == [],
    ),
    Case(
        "advanced filter",
        lambda c: c.invoices.advanced_filter({"state": "open"}),
        "POST",
        "/invoices/filter/advanced.xml",
        200,
        docs([INVOICE], m.Invoice),
        ("filter", {"state": "open"}),
        lambda r: r == [INVOICE],
    ),
    Case(
        "get",
        lambda c: c.invoices.get(42),
        "GET",
        "/invoices/42.xml",
        200,
        doc(INVOICE),
        None,
        lambda r: r == INVOICE,
    ),
    Case(
        "get by number",
        lambda c: c.invoices.get_by_invoice_id("2014/0096 x"),
        "GET",
        "/invoices/invoice_id/2014%2F0096%20x.xml",
        200,
        doc(INVOICE),
        None,
        lambda r: r == INVOICE,
    ),
    Case(
        "create",
        lambda c: c.invoices.create(
            m.Invoice(
                contact_id=7,
                state="paid",
                details=[
                    m.InvoiceDetail(
                        description="Work & more", tax_rate_id=1, price=Decimal("60.50")
                    )
                ],
            )
        ),
        "POST",
        "/invoices.xml",
        201,
        doc(INVOICE),
        (
            "invoice",
            {
                "contact_id": "7",
                "details_attributes": [
                    {"description": "Work & more", "price": "60.50", "tax_rate_id": "1"}
                ],
            },
        ),
        lambda r: r == INVOICE,
    ),
    Case(
        "update",
        lambda c: c.invoices.update(
            42,
            po_number="PO-9",
            attention=None,
            details=[
                m.InvoiceDetail(id=5, destroy=True),
                m.InvoiceDetail(id=6, price=Decimal("1.10")),
                m.InvoiceDetail(description="New", tax_rate_id=2),
            ],
        ),
        "PUT",
        "/invoices/42.xml",
        200,
        doc(INVOICE),
        (
            "invoice",
            {
                "po_number": "PO-9",
                "attention": None,
                "details_attributes": [
                    {"id": "5", "_destroy": "true"},
                    {"id": "6", "price": "1.10"},
                    {"description": "New", "tax_rate_id": "2"},
                ],
            },
        ),
        lambda r: r == INVOICE,
    ),
    Case(
        "send invoice",
        lambda c: c.invoices.send_invoice(
            42, email="a@example.com", invoice_email="Hello", send_method="email"
        ),
        "PUT",
        "/invoices/42/send_invoice.xml",
        200,
        doc(INVOICE),
        ("invoice", {"email": "a@example.com", "invoice_email": "Hello", "send_method": "email"}),
        lambda r: r == INVOICE,
    ),
    Case(
        "send reminder",
        lambda c: c.invoices.send_reminder(
            42, email="a@example.com", invoice_email="Pay", send_method=m.SendMethod.POST
        ),
        "PUT",
        "/invoices/42/send_reminder.xml",
        200,
        doc(INVOICE),
        ("invoice", {"email": "a@example.com", "invoice_email": "Pay", "send_method": "post"}),
        lambda r: r == INVOICE,
    ),
    Case(
        "register payment",
        lambda c: c.invoices.register_payment(
            42,
            m.InvoicePayment(
                payment_date=dt.date(2014, 7, 31),
                payment_method="bank_transfer",
                price=Decimal("60.50"),
                send_email=False,
            ),
        ),
        "POST",
        "/invoices/42/payments.xml",
        201,
        doc(INVOICE),
        (
            "payment",
            {
                "payment_date": "2014-07-31",
                "payment_method": "bank_transfer",
                "price": "60.50",
                "send_email": "false",
            },
        ),
        lambda r: r == INVOICE,
    ),
    Case(
        "delete",
        lambda c: c.invoices.delete(42),
        "DELETE",
        "/invoices/42.xml",
        200,
        lambda fmt: b"",
        None,
        lambda r: r is None,
    ),
    Case(
        "sync list",
        lambda c: c.invoices.sync_list_ids(),
        "GET",
        "/invoices/sync_list_ids.xml",
        200,
        lambda fmt: dump_sync_entries([m.SyncEntry(1, 10), m.SyncEntry(2, 20)], fmt),  # type: ignore[arg-type]
        None,
        lambda r: r == [m.SyncEntry(1, 10), m.SyncEntry(2, 20)],
    ),
    Case(
        "sync fetch",
        lambda c: c.invoices.sync_fetch_ids([42, 43, 42]),
        "POST",
        "/invoices/sync_fetch_ids.xml",
        200,
        docs([INVOICE], m.Invoice),
        ("invoices", {"ids": {"id": ["42", "43"]}}),
        lambda r: r == [INVOICE],
    ),
    Case(
        "templates list",
        lambda c: c.recurring_templates.list(),
        "GET",
        "/recurring_templates.xml",
        200,
        docs([TEMPLATE], m.RecurringTemplate),
        None,
        lambda r: r == [TEMPLATE],
    ),
    Case(
        "template get",
        lambda c: c.recurring_templates.get(8),
        "GET",
        "/recurring_templates/8.xml",
        200,
        doc(TEMPLATE),
        None,
        lambda r: r == TEMPLATE,
    ),
    Case(
        "template create",
        lambda c: c.recurring_templates.create(
            m.RecurringTemplate(
                contact_id=7,
                frequency=1,
                frequency_type=m.FrequencyType.MONTHLY,
                start_date=FUTURE,
                details=[m.RecurringTemplateDetail(description="Hosting", tax_rate_id=1)],
            )
        ),
        "POST",
        "/recurring_templates.xml",
        201,
        doc(TEMPLATE),
        (
            "recurring_template",
            {
                "contact_id": "7",
                "frequency": "1",
                "frequency_type": "2",
                "start_date": FUTURE.isoformat(),
                "details_attributes": [{"description": "Hosting", "tax_rate_id": "1"}],
            },
        ),
        lambda r: r == TEMPLATE,
    ),
    Case(
        "template update",
        lambda c: c.recurring_templates.update(8, frequency=3, send_invoice=True),
        "PUT",
        "/recurring_templates/8.xml",
        200,
        doc(TEMPLATE),
        ("recurring_template", {"frequency": "3", "send_invoice": "true"}),
        lambda r: r == TEMPLATE,
    ),
    Case(
        "template delete",
        lambda c: c.recurring_templates.delete(8),
        "DELETE",
        "/recurring_templates/8.xml",
        200,
        lambda fmt: b"",
        None,
        lambda r: r is None,
    ),
    Case(
        "current session",
        lambda c: c.current_session(),
        "GET",
        "/current_session.xml",
        200,
        doc(
            m.CurrentSession(
                id=1, email="a@example.com", name="Ann", language="nl", time_zone="Europe/Amsterdam"
            )
        ),
        None,
        lambda r: r.time_zone == "Europe/Amsterdam",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_operation(api: ScriptedAPI, fmt: str, case: Case) -> None:
    api.reply(
        case.method,
        API + case.path.replace("%2F", "/").replace("%20", " "),
        case.reply_status,
        case.reply(fmt),
    )
    async with scripted_client(api, fmt) as client:
        result = await case.call(client)
    assert case.check(result), result
    (seen,) = api.seen
    assert seen.method == case.method
    assert seen.raw_path == API + case.path  # as sent: escapes kept
    media = f"application/{fmt}"
    assert seen.headers["Accept"] == media
    if case.sent is None:
        assert seen.body == b""
        assert "Content-Type" not in seen.headers
    else:
        assert seen.headers["Content-Type"] == media
        root, body = received(seen.body, fmt)
        expected_root, expected = case.sent
        if fmt == "json" and expected_root == "invoices":
            expected = {"ids": expected["ids"]["id"]}  # {"invoices": {"ids": [42, 43]}}
        assert (root, body) == (expected_root, expected)


async def test_get_by_number_escapes_the_path(api: ScriptedAPI) -> None:
    api.reply("GET", API + "/invoices/invoice_id/2014/0096 x.xml", 200, doc(INVOICE)("xml"))
    async with scripted_client(api) as client:
        await client.invoices.get_by_invoice_id("2014/0096 x")
    # The slash stays escaped: one path segment, not two.
    assert api.seen[0].raw_path == API + "/invoices/invoice_id/2014%2F0096%20x.xml"


async def test_sync_fetch_sends_at_most_100_ids_a_request(api: ScriptedAPI, fmt: str) -> None:
    path = API + "/invoices/sync_fetch_ids.xml"
    for _ in range(3):
        api.reply("POST", path, 200, dump_list([INVOICE], fmt, m.Invoice))  # type: ignore[arg-type]
    async with scripted_client(api, fmt) as client:
        result = await client.invoices.sync_fetch_ids(list(range(250)) + list(range(50)))
    assert len(result) == 3
    sizes = []
    for seen in api.seen:
        _root, body = received(seen.body, fmt)
        ids = body["ids"]["id"] if fmt == "xml" else body["ids"]
        sizes.append(len(ids))
    assert sizes == [100, 100, 50]
    async with scripted_client(api, fmt) as client:
        assert await client.invoices.sync_fetch_ids([]) == []
    assert len(api.seen) == 3  # no ids, no request


async def test_create_without_body_follows_location(api: ScriptedAPI) -> None:
    api.reply(
        "POST", API + "/invoices.xml", 201, b"", {"Location": "https://x/api/v1.0/invoices/42.xml"}
    )
    api.reply("GET", API + "/invoices/42.xml", 200, doc(INVOICE)("xml"))
    async with scripted_client(api) as client:
        created = await client.invoices.create(
            m.Invoice(contact_id=7, details=[m.InvoiceDetail(description="W", tax_rate_id=1)])
        )
    assert created == INVOICE
    assert [s.method for s in api.seen] == ["POST", "GET"]


VALIDATION_CASES = [
    ("no lines", lambda c: c.invoices.create(m.Invoice(contact_id=7)), "details"),
    (
        "no contact",
        lambda c: c.invoices.create(
            m.Invoice(details=[m.InvoiceDetail(description="W", tax_rate_id=1)])
        ),
        "contact_id",
    ),
    (
        "line without description",
        lambda c: c.invoices.create(
            m.Invoice(contact_id=1, details=[m.InvoiceDetail(tax_rate_id=1)])
        ),
        "details.description",
    ),
    (
        "line without tax rate",
        lambda c: c.invoices.update(1, details=[m.InvoiceDetail(description="W")]),
        "details.tax_rate_id",
    ),
    (
        "destroy without id",
        lambda c: c.invoices.update(1, details=[m.InvoiceDetail(destroy=True)]),
        "details._destroy",
    ),
    (
        "bad send method",
        lambda c: c.invoices.send_invoice(
            1, email="a@example.com", invoice_email="x", send_method="pigeon"
        ),
        "send_method",
    ),
    (
        "bad payment method",
        lambda c: c.invoices.register_payment(
            1, m.InvoicePayment(payment_method="barter", price=Decimal(1))
        ),
        "payment_method",
    ),
    (
        "template minimum",
        lambda c: c.recurring_templates.create(m.RecurringTemplate(contact_id=1)),
        "frequency_type",
    ),
    (
        "template frequency type",
        lambda c: c.recurring_templates.create(
            m.RecurringTemplate(
                contact_id=1,
                frequency=1,
                frequency_type=9,
                details=[m.RecurringTemplateDetail(description="x", tax_rate_id=1)],
            )
        ),
        "frequency_type",
    ),
    (
        "template start date past",
        lambda c: c.recurring_templates.create(
            m.RecurringTemplate(
                contact_id=1,
                frequency=1,
                frequency_type=1,
                start_date=dt.date.today(),
                details=[m.RecurringTemplateDetail(description="x", tax_rate_id=1)],
            )
        ),
        "start_date",
    ),
    (
        "template update start",
        lambda c: c.recurring_templates.update(1, start_date=dt.date(2000, 1, 1)),
        "start_date",
    ),
]


@pytest.mark.parametrize(
    ("name", "call", "attribute"), VALIDATION_CASES, ids=[v[0] for v in VALIDATION_CASES]
)
async def test_client_side_validation_spends_no_request(
    api: ScriptedAPI, name: str, call: Any, attribute: str
) -> None:
    async with scripted_client(api) as client:
        with pytest.raises(ia.ValidationError) as info:
            await call(client)
        assert client.budget.snapshot().used_in_period == 0
    assert attribute in [e.attribute for e in info.value.errors]
    assert info.value.status == 0
    assert "not sent" in str(info.value)
    assert api.seen == []


async def test_validation_can_be_skipped(api: ScriptedAPI) -> None:
    api.reply(
        "POST",
        API + "/invoices.xml",
        422,
        b"<errors><error><attribute>details</attribute><message>should contain at least one line</message></error></errors>",
    )
    async with scripted_client(api, validate=False) as client:
        with pytest.raises(ia.ValidationError) as info:
            await client.invoices.create(m.Invoice(contact_id=7))
    assert info.value.status == 422
    assert info.value.errors == [ia.FieldError("details", "should contain at least one line")]


async def test_update_refuses_unknown_and_read_only_names(api: ScriptedAPI) -> None:
    async with scripted_client(api) as client:
        with pytest.raises(TypeError, match="po_nmber"):
            await client.invoices.update(1, po_nmber="x")
        with pytest.raises(ValueError, match="read-only"):
            await client.invoices.update(1, state="paid")
    assert api.seen == []


@pytest.mark.parametrize("resource", ["invoices", "recurring_templates"])
async def test_a_bad_attribute_in_update_is_an_invoicing_error_naming_it(
    api: ScriptedAPI, resource: str
) -> None:
    """`update(id, **user_json)` in a handler that answers `InvoicingError`: a misspelt or
    read-only name is one (a `ValidationError`), still a `TypeError`/`ValueError`, and
    names the attribute, its close matches and the accepted ones."""
    async with scripted_client(api) as client:
        update = getattr(client, resource).update
        with pytest.raises(ia.InvalidArgumentError) as misspelt:
            await update(1, dicount="2.5")
        with pytest.raises(ia.InvoicingError) as read_only:
            await update(1, created_at=None)
    assert isinstance(misspelt.value, ia.ValidationError)
    assert isinstance(misspelt.value, TypeError)
    assert isinstance(misspelt.value, ValueError)
    assert isinstance(read_only.value, ia.InvalidArgumentError)
    assert misspelt.value.status == 0
    assert misspelt.value.method == "PUT"
    assert misspelt.value.url.endswith("/1.xml")
    [error] = misspelt.value.errors
    assert error.attribute == "dicount"
    assert "did you mean 'discount'" in error.message
    assert "currency" in error.message.partition("(updatable: ")[2]
    assert read_only.value.errors[0].attribute == "created_at"
    assert "read-only" in str(read_only.value)
    assert api.seen == []
