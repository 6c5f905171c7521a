from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from invoicing_async._models.documents import (
    MemberError,
    load_field_errors,
    load_list,
    load_model,
    load_sync_revisions,
)
from invoicing_async._models.payloads import (
    Format,
    changes_to_wire,
    dump_model,
    dump_sync_fetch_ids,
    to_wire,
)
from invoicing_async._models.stored import load_invoice_documents
from invoicing_async.errors import DecodeError, FieldError
from invoicing_async.models import (
    CurrentSession,
    Invoice,
    InvoiceDetail,
    InvoiceState,
    PaymentMethod,
    RecurringTemplate,
)

JSON_INVOICE = b"""{"invoice": {
  "id": 42, "state": "open", "exchange_rate": 1, "total_paid": "181.5",
  "total-unpaid": "-0.0", "tax_components": [{"rate": "0.21"}],
  "sent_at": "2014-07-30T17:33:41+02:00", "invoice_date": "2014-07-30",
  "details": [{"id": 5, "price": 60.5, "tax": "12.71", "_destroy": false}],
  "payments": [{"payment_method": "credit_invoice", "price_base": "1.0"}],
  "history": []
}}"""


def test_json_money_is_exact_whether_string_or_number() -> None:
    invoice = load_model(JSON_INVOICE, "json", Invoice)
    assert invoice.exchange_rate == Decimal(1)
    assert invoice.total_paid == Decimal("181.5")
    assert invoice.total_unpaid == Decimal("-0.0")
    assert invoice.details[0].price == Decimal("60.5")
    assert isinstance(invoice.details[0].price, Decimal)
    assert invoice.invoice_date == dt.date(2014, 7, 30)


def test_blank_amounts_dates_and_times_read_as_none() -> None:
    # Text goes straight to the cached readers: blank text is none there, not an error.
    body = (
        b'{"invoice": {"total_paid": "", "discount": "  ", "invoice_date": "",'
        b' "created_at": " ", "details": [{"price": "", "updated_at": ""}],'
        b' "payments": [{"payment_date": " ", "price": "1.5"}]}}'
    )
    invoice = load_model(body, "json", Invoice)
    assert (invoice.total_paid, invoice.discount, invoice.invoice_date) == (None, None, None)
    assert invoice.created_at is None
    assert (invoice.details[0].price, invoice.details[0].updated_at) == (None, None)
    assert invoice.payments[0].payment_date is None
    assert invoice.payments[0].price == Decimal("1.5")


def test_unknown_attributes_survive_in_extra() -> None:
    invoice = load_model(JSON_INVOICE, "json", Invoice)
    assert invoice.extra["tax_components"] == [{"rate": "0.21"}]
    assert invoice.extra["sent_at"] == "2014-07-30T17:33:41+02:00"
    assert invoice.details[0].extra == {"tax": "12.71"}
    assert invoice.payments[0].extra == {"price_base": "1.0"}


def test_unknown_names_survive_however_many_and_whether_seen_before() -> None:
    """Names the models do not know are remembered as unknown up to a bound: a name seen
    again, and thousands of new ones past the bound, still land in `extra`, and a lone
    surrogate in one is still refused."""
    for round_ in range(2):
        for i in range(2_000):
            body = f'{{"invoice": {{"id": {i}, "fee_{i}": "{round_}", "tax": "1.5"}}}}'
            invoice = load_model(body.encode(), "json", Invoice)
            assert invoice.extra == {f"fee_{i}": str(round_), "tax": "1.5"}, i
    assert load_model(b'{"invoice": {"id": 1}}', "json", Invoice).extra == {}
    with pytest.raises(DecodeError, match="surrogate"):
        load_model(b'{"invoice": {"fee_1": "\\ud800"}}', "json", Invoice)


def test_unknown_enum_values_decode_and_known_ones_compare() -> None:
    invoice = load_model(JSON_INVOICE, "json", Invoice)
    assert invoice.state == InvoiceState.OPEN
    assert invoice.payments[0].payment_method == PaymentMethod.CREDIT_INVOICE
    weird = load_model(b'{"invoice": {"state": "archived"}}', "json", Invoice)
    assert weird.state == "archived"


def test_current_session_reads_user_root() -> None:
    xml = b"""<user><id type="integer">3</id><email>a@example.com</email><name>Ann</name>
    <language>nl</language><time-zone>Europe/Amsterdam</time-zone><admin type="boolean">true</admin></user>"""
    me = load_model(xml, "xml", CurrentSession)
    assert (me.id, me.email, me.language, me.time_zone) == (
        3,
        "a@example.com",
        "nl",
        "Europe/Amsterdam",
    )
    assert me.extra == {"admin": True}


@pytest.mark.parametrize(
    ("body", "fmt", "fragment"),
    [
        (b"<contact><id>1</id></contact>", "xml", "expected a 'invoice' document"),
        (b'{"contact": {"id": 1}}', "json", "expected a 'invoice' document"),
        (b"<invoice><id>12a</id></invoice>", "xml", "Invoice.id: not an integer"),
        (
            b'{"invoice": {"invoice_date": "31-07-2014"}}',
            "json",
            "Invoice.invoice_date: not a date",
        ),
        (b'{"invoice": {"details": {"id": 1}}}', "json", "Invoice.details: expected a list"),
        (b'{"invoice": {"total_paid": true}}', "json", "Invoice.total_paid: expected a decimal"),
        (b'{"invoice": {"details": [{"price": "abc"}]}}', "json", "InvoiceDetail.price"),
        (b"[1, 2]", "json", "expected a 'invoice' object"),
    ],
)
def test_bad_documents_name_the_field(body: bytes, fmt: Format, fragment: str) -> None:
    with pytest.raises(DecodeError, match=fragment):
        load_model(body, fmt, Invoice)


def test_list_documents_in_every_shape() -> None:
    assert load_list(b'<invoices type="array"/>', "xml", Invoice) == []
    assert load_list(b"<invoices/>", "xml", Invoice) == []
    assert load_list(b"[]", "json", Invoice) == []
    one = load_list(b'[{"invoice": {"id": 1}}]', "json", Invoice)
    assert [i.id for i in one] == [1]
    wrapped = load_list(b'{"invoices": [{"invoice": {"id": 1}}, {"id": 2}]}', "json", Invoice)
    assert [i.id for i in wrapped] == [1, 2]
    # Repeated members without type="array", as Rails' from_xml reads them.
    plain = load_list(b"<invoices><invoice><id>1</id></invoice></invoices>", "xml", Invoice)
    assert [i.id for i in plain] == [1]
    with pytest.raises(DecodeError, match="list"):
        load_list(b"<invoice><id>1</id></invoice>", "xml", Invoice)


def test_sync_entries_both_formats() -> None:
    xml = b"""<invoices type="array"><invoice><id type="integer">1</id>
    <revision type="integer">1406734421</revision></invoice></invoices>"""
    assert list(load_sync_revisions(xml, "xml").items()) == [(1, 1406734421)]
    js = b'[{"invoice": {"id": 1, "revision": 5}}, {"invoice": {"id": "2", "revision": "6"}}]'
    assert list(load_sync_revisions(js, "json").items()) == [(1, 5), (2, 6)]
    with pytest.raises(DecodeError, match="revision"):
        load_sync_revisions(b'[{"invoice": {"id": 1}}]', "json")


@pytest.mark.parametrize(
    ("body", "fmt"),
    [
        (
            b"<errors><error><attribute>details</attribute>"
            b"<message>should contain at least one line</message></error></errors>",
            "xml",
        ),
        (b"<errors><error>details should contain at least one line</error></errors>", "xml"),
        (b'[["details", "should contain at least one line"]]', "json"),
        (b'{"details": ["should contain at least one line"]}', "json"),
        (b'{"errors": {"details": ["should contain at least one line"]}}', "json"),
        (b'{"errors": [["details", "should contain at least one line"]]}', "json"),
    ],
)
def test_error_documents_in_every_shape(body: bytes, fmt: Format) -> None:
    errors = load_field_errors(body, fmt)
    assert len(errors) == 1
    assert "should contain at least one line" in errors[0].message
    if errors[0].attribute is not None:
        assert errors[0].attribute == "details"


def test_several_xml_errors_and_unreadable_bodies() -> None:
    body = (
        b"<errors><error><attribute>contact_id</attribute><message>can't be blank</message></error>"
        b"<error><attribute>details</attribute><message>too short</message></error></errors>"
    )
    assert load_field_errors(body, "xml") == [
        FieldError("contact_id", "can't be blank"),
        FieldError("details", "too short"),
    ]
    assert load_field_errors(b"<html>oops", "xml") == []
    assert load_field_errors(b"", "json") == []


def test_request_bodies_leave_read_only_attributes_out() -> None:
    invoice = Invoice(
        id=9,
        state="paid",
        revision=3,
        contact_id=7,
        total_paid=Decimal(1),
        details=[
            InvoiceDetail(
                id=5, description="x", tax_rate_id=1, total_price_incl_tax=Decimal(2), destroy=True
            )
        ],
        extra={"sepa_active": True},
    )
    wire = to_wire(invoice, fmt="xml", mode="request")
    assert wire == {
        "contact-id": 7,
        "details-attributes": [{"id": 5, "description": "x", "tax-rate-id": 1, "_destroy": True}],
    }
    assert b"<_destroy" in dump_model(invoice, "xml")
    assert b'"details_attributes"' in dump_model(invoice, "json")


def test_changes_name_only_what_changes_and_refuse_typos() -> None:
    assert changes_to_wire(Invoice, {"po_number": None, "discount": Decimal("2.5")}, fmt="xml") == {
        "po-number": None,
        "discount": Decimal("2.5"),
    }
    with pytest.raises(TypeError, match="po_numbr"):
        changes_to_wire(Invoice, {"po_numbr": "x"}, fmt="json")
    with pytest.raises(ValueError, match="read-only"):
        changes_to_wire(Invoice, {"state": "paid"}, fmt="json")
    with pytest.raises(ValueError, match="read-only"):
        changes_to_wire(RecurringTemplate, {"next_date": dt.date(2030, 1, 1)}, fmt="json")


def test_sync_fetch_bodies() -> None:
    assert dump_sync_fetch_ids([1, 2], "xml").endswith(
        b"<invoices><ids><id>1</id><id>2</id></ids></invoices>"
    )
    assert dump_sync_fetch_ids([1, 2], "json") == b'{"invoices":{"ids":[1,2]}}'


def test_repr_is_short_and_to_dict_exports_rows() -> None:
    invoice = load_model(JSON_INVOICE, "json", Invoice)
    text = repr(invoice)
    assert text.startswith("Invoice(id=42, state='open'")
    assert "details=[1 items]" in text
    assert len(text) < 200
    row = invoice.to_dict()
    assert row["id"] == 42
    assert row["details"][0]["price"] == Decimal("60.5")
    assert row["extra"]["sent_at"].startswith("2014")


def test_sync_revisions_are_compact_and_handle_odd_orders() -> None:
    from invoicing_async.models import SyncRevisions

    revisions = SyncRevisions([(5, 50), (2, 20), (5, 40), (9, 90)])
    assert len(revisions) == 3
    assert dict(revisions.items()) == {2: 20, 5: 50, 9: 90}  # the highest of a repeated id
    assert revisions[5] == 50
    assert 2 in revisions
    assert 3 not in revisions
    with pytest.raises(KeyError):
        revisions[3]
    xml = b"""<invoices type="array"><invoice><id type="integer">3</id>
    <revision type="integer">7</revision></invoice></invoices>"""
    loaded = load_sync_revisions(xml, "xml")
    assert dict(loaded) == {3: 7}
    assert dict(load_sync_revisions(b"[]", "json")) == {}
    assert dict(load_sync_revisions(b'<invoices type="array"/>', "xml")) == {}
    with pytest.raises(DecodeError, match="revision"):
        load_sync_revisions(b'[{"invoice": {"id": 1}}]', "json")
    with pytest.raises(DecodeError, match="invoices"):
        load_sync_revisions(
            b"<contacts><contact><id>1</id><revision>2</revision></contact></contacts>", "xml"
        )


def load_each(body: bytes, fmt: Format, _cls: object) -> tuple[list[Invoice], list[MemberError]]:
    """A sync-fetch reply's invoices as models, and the members set aside."""
    documents, failed = load_invoice_documents(body, fmt, limit=100)
    return [document.model() for document in documents], failed


def test_an_unreadable_member_is_set_aside_with_its_id() -> None:
    body = (
        b'[{"invoice": {"id": 1, "revision": 5}}, {"invoice": {"id": 2, "created_at": "yesterday"}},'
        b' {"invoice": {"id": "x", "created_at": "never"}}, {"invoice": {"id": 3}}]'
    )
    models, failed = load_each(body, "json", Invoice)
    assert [i.id for i in models] == [1, 3]
    assert [f.ident for f in failed] == [2, None]
    assert "created_at" in failed[0].error


@pytest.mark.parametrize(
    ("field", "escaped"),
    [
        ("po_number", '"bad \\ud800 text"'),  # a known text field
        ("note", '"\\udfff"'),  # a low surrogate alone
        ("custom", '{"deep": ["x", "\\ud83d"]}'),  # a field the models do not know
    ],
)
def test_a_lone_surrogate_sets_its_invoice_aside_naming_the_field(field: str, escaped: str) -> None:
    """JSON may escape half a character; no store could encode it: a DecodeError per invoice."""
    body = (
        b'[{"invoice": {"id": 1, "po_number": "fine \\ud83d\\ude00"}}, {"invoice": {"id": 2, "'
        + field.encode()
        + b'": '
        + escaped.encode()
        + b'}}, {"invoice": {"id": 3}}]'
    )
    models, failed = load_each(body, "json", Invoice)
    assert [i.id for i in models] == [1, 3]
    assert models[0].po_number == "fine \U0001f600"  # a proper pair is one character
    assert [f.ident for f in failed] == [2]
    assert f"Invoice.{field}" in failed[0].error
    assert "lone surrogate" in failed[0].error
