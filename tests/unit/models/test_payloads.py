"""Wire names, the root rule, and the request payloads the resources send."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from invoicing_async._models.documents import load_one_of
from invoicing_async._models.fields import wire_key
from invoicing_async._models.payloads import (
    dump_changes,
    dump_filter,
    dump_send,
    root_name,
    unwrap_root,
)
from invoicing_async.errors import DecodeError
from invoicing_async.models import (
    Invoice,
    InvoiceDetail,
    InvoicePayment,
    RecurringTemplate,
    SendMethod,
)

XML = b'<?xml version="1.0" encoding="utf-8"?>\n'


def test_wire_names_per_format() -> None:
    assert wire_key("total_price_incl_tax", "xml") == "total-price-incl-tax"
    assert wire_key("total_price_incl_tax", "json") == "total_price_incl_tax"
    assert wire_key("_destroy", "xml") == "_destroy"
    assert root_name(RecurringTemplate, "xml") == "recurring-template"
    assert root_name(RecurringTemplate, "json", plural=True) == "recurring_templates"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"invoice": {"id": 1}}, ("invoice", {"id": 1})),
        ({"recurring-template": {"id": 1}}, ("recurring_template", {"id": 1})),
        ({"invoices": []}, ("invoices", [])),
        ({"invoice": "x"}, ("invoice", "x")),  # a root name: unwrapped, refused later
        ({"id": 1}, (None, {"id": 1})),  # one attribute, bare
        ({"id": 1, "state": "open"}, (None, {"id": 1, "state": "open"})),
        ([{"invoice": {}}], (None, [{"invoice": {}}])),
    ],
)
def test_one_rule_unwraps_rails_roots(value: Any, expected: tuple[str | None, Any]) -> None:
    assert unwrap_root(value) == expected


def test_send_payload_both_formats() -> None:
    assert dump_send("a@b.c", "Hi & <you>", SendMethod.POST, "xml") == XML + (
        b"<invoice><email>a@b.c</email><invoice-email>Hi &amp; &lt;you&gt;</invoice-email>"
        b"<send-method>post</send-method></invoice>"
    )
    assert dump_send("a@b.c", "Hi", "hand", "json") == (
        b'{"invoice":{"email":"a@b.c","invoice_email":"Hi","send_method":"hand"}}'
    )


def test_change_sets_are_wrapped_in_the_model_root() -> None:
    details = [InvoiceDetail(id=3, destroy=True)]
    assert dump_changes(Invoice, {"po_number": None, "details": details}, "xml") == XML + (
        b'<invoice><po-number nil="true"/><details-attributes type="array">'
        b'<detail><id type="integer">3</id><_destroy type="boolean">true</_destroy></detail>'
        b"</details-attributes></invoice>"
    )
    assert dump_changes(RecurringTemplate, {"frequency": 2}, "xml") == XML + (
        b'<recurring-template><frequency type="integer">2</frequency></recurring-template>'
    )
    assert dump_changes(RecurringTemplate, {"start_date": dt.date(2030, 1, 2)}, "json") == (
        b'{"recurring_template":{"start_date":"2030-01-02"}}'
    )


def test_filter_parameters_are_sent_as_given() -> None:
    assert dump_filter({"state": "open", "price_from": Decimal("1.50")}, "json") == (
        b'{"filter":{"state":"open","price_from":"1.50"}}'
    )
    assert dump_filter({"state_name": "open"}, "xml", root="search") == XML + (
        b"<search><state_name>open</state_name></search>"
    )


def test_one_of_several_documents() -> None:
    classes = (Invoice, InvoicePayment)
    assert load_one_of(b'{"invoice": {"id": 4}}', "json", classes) == Invoice(id=4)
    assert load_one_of(b"<payment><id>3</id></payment>", "xml", classes) == InvoicePayment(id=3)
    assert load_one_of(b"<invoice/>", "xml", classes) == Invoice()
    assert load_one_of(b" \n", "xml", classes) is None
    assert load_one_of(b'{"id": 3}', "json", classes) is None  # bare: cannot tell which
    with pytest.raises(DecodeError, match="'invoice' or 'payment' document, got 'contact'"):
        load_one_of(b"<contact/>", "xml", classes)
    with pytest.raises(DecodeError, match="'invoice' or 'payment' document, got list"):
        load_one_of(b"[1]", "json", classes)
    with pytest.raises(DecodeError, match="malformed"):
        load_one_of(b"{", "json", classes)
