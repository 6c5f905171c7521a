"""Single-model JSON reads (`load_model`, `load_one_of`: get, create, update, send and
payment answers) give exactly what the converter gives, whether the body was read into a
closed struct, or checked in C as a tree, and built by the generated builders, or read
by the converter: the same models, the same refusals and errors."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invoicing_async._models import documents
from invoicing_async._models.documents import load_model, load_one_of
from invoicing_async.errors import DecodeError
from invoicing_async.models import Invoice, InvoicePayment
from tests.unit.models.strategies import models
from tests.unit.models.test_stored import member_tree, write


def read(body: bytes) -> Any:
    try:
        return load_model(body, "json", Invoice)
    except DecodeError as exc:
        return ("error", str(exc))


def read_either(body: bytes) -> Any:
    try:
        return load_one_of(body, "json", (Invoice, InvoicePayment))
    except DecodeError as exc:
        return ("error", str(exc))


def by_converter(reader: Any, body: bytes) -> Any:
    """`reader` with the C check never sure: every body goes through the converter."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(documents, "load_closed", lambda body, cls: None)
        mp.setattr(documents, "member_tree", lambda raw: None)
        return reader(body)


def same_as_converter(body: bytes) -> None:
    assert read(body) == by_converter(read, body)
    assert read_either(body) == by_converter(read_either, body)


@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(models(Invoice, extra=False), st.data())
def test_any_answer_reads_as_the_converter_reads_it(invoice: Invoice, data: st.DataObject) -> None:
    same_as_converter(write(member_tree(invoice, data)).encode())


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models(InvoicePayment, extra=True))
def test_a_payment_answer_reads_as_the_converter_reads_it(payment: InvoicePayment) -> None:
    body = documents.dump_model(payment, "json", mode="document")
    assert read_either(body) == by_converter(read_either, body) == payment


@pytest.mark.parametrize(
    "body",
    [
        '{"invoice":{"id":1,"x":' + "[" * 99 + "]" * 99 + "}}",  # too deep for `extra`
        '{"invoice":{"id":1,"x":' + "[" * 98 + "]" * 98 + "}}",
        '{"invoice":{"id":1,"details":[{"id":2}],"details_attributes":null}}',  # emptied
        '{"invoice":{"id":1,"details_attributes":null,"details":[{"id":2}]}}',
        '{"invoice":{"id":1,"details":[{"id":2,"q":{"a":[1]}}],"y":"z","y-y":2}}',
        '{"invoice":{"id":1,"invoice_date":"2014-07-31T23:30:00-02:00"}}',  # the date part
        '{"invoice":{"id":1,"created_at":"2014-07-31T23:30:00"}}',  # naive: UTC
        '{"invoice":{"id":1,"created_at":"2014-07-31T23:59:60Z"}}',
        '{"invoice":{"id":1,"created_at":"  ","updated_at":" 2014-07-31 23:30 "}}',
        '{"invoice":{"id":1,"created_at":"yesterday"}}',
        '{"invoice":{"id":1,"id":2,"details":[{"id":3,"id":4}]}}',  # the last one counts
        '{"invoice":{"id":1,"details":[{"id":2}],"details-attributes":null}}',
        '{"invoice":{"id":1,"invoice-id":null,"invoice_id":"A"}}',
        '{"invoice":{"id":1},"x":1}',
        '{"invoice":null}',
        '\ufeff{"invoice":{"id":1}}',
        '{"invoice":{"id":1,"price":"١٢"}}',
        '{"invoice":{"id":1,"total_paid":"١٢"}}',  # not ASCII digits
        '{"invoice":{"id":1,"total_paid":"-0.50","discount":3}}',
        '{"invoice":{"id":1,"total_paid":"  ","discount":"NaN"}}',  # amounts: any text
        '{"invoice":{"id":1,"total_paid":"1e5","exchange_rate":" 1.5"}}',
        '{"invoice":{"id":1,"total_paid":"' + "9" * 300 + '"}}',
        '{"invoice":{"id":1,"details":[{"id":2,"price":"1E+101"}]}}',
        '{"invoice":{"id":1,"show_tax":1,"days_open":true}}',
        '{"invoice":{"id":1,"x":"\\ud800"}}',
        '{"invoice":{"id":1,"name":"\\udfff"}}',
        '{"invoice":{"id":-9223372036854775809}}',
        '{"invoice":{"id":1,"x":123456789012345678901234567890}}',
        '{"invoice":{}}',
        '{"invoice":[]}',
        '{"id":1}',
        '{"payment":{"id":1,"price":"2.50","payment_date":"2024-01-05"}}',
    ],
)
def test_edge_answers_read_as_the_converter_reads_them(body: str) -> None:
    same_as_converter(body.encode())


@pytest.mark.parametrize(
    "body", [b'{"\x80nvoice":', b'{"invoice":{"id":1,"name":"\xff"}}', b"\xff\xfe{}"]
)
def test_answers_that_are_not_utf8_read_as_the_converter_reads_them(body: bytes) -> None:
    """msgspec raises `UnicodeDecodeError` for them (the fuzzer found it): a `DecodeError`,
    as the converter's path says, never a raw `ValueError`."""
    same_as_converter(body)


def test_what_the_service_sends_is_built_without_the_converter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from invoicing_async._models import strict_json
    from invoicing_async.testing import FakeInvoicingService
    from invoicing_async.testing._generator import populate

    service = FakeInvoicingService()
    populate(service.account, 3, seed=1)
    bodies = [
        documents.dump_model(invoice, "json", mode="document")
        for invoice in service.account.invoices.values()
    ]
    expected = [load_model(body, "json", Invoice) for body in bodies]

    def refuse(data: Any, cls: Any) -> Any:
        raise AssertionError("read by the converter")

    with monkeypatch.context() as mp:  # read into the closed structs, no tree made
        mp.setattr(documents, "member_tree", refuse)
        assert [load_model(body, "json", Invoice) for body in bodies] == expected
    monkeypatch.setattr(strict_json, "structure", refuse)
    monkeypatch.setattr(documents, "load_closed", lambda body, cls: None)  # a tree read
    assert [load_model(body, "json", Invoice) for body in bodies] == expected
    assert all(invoice.details for invoice in expected)


@attrs.define
class _Stored:
    a: int | None = None
    b: str | None = None


@attrs.define
class _Validated:
    a: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(int))
    )
    b: str | None = None


@attrs.define
class _Hooked:
    a: int | None = None
    b: str | None = None

    def __attrs_post_init__(self) -> None:
        self.b = "set by the hook"


@attrs.frozen
class _Frozen:
    a: int | None = None
    b: str | None = None


def test_builders_store_attributes_only_where_init_does_nothing_else() -> None:
    """A model is built by storing its attributes only when its `__init__` would do
    nothing but store them; any validator, hook, frozen class, or attribute not given
    makes the builder call the class (so nothing the class does is skipped)."""
    from invoicing_async._models.strict_json import _assigns_only

    assert all(
        _assigns_only(cls, {f.name for f in attrs.fields(cls)})
        for cls in (Invoice, InvoicePayment, _Stored)
    )
    assert not _assigns_only(_Stored, {"a"})  # b would be left unset
    for cls in (_Validated, _Hooked, _Frozen):
        assert not _assigns_only(cls, {"a", "b"}), cls
