"""Sync-fetch replies read as documents (`load_invoice_documents`) give exactly what the
converter gives member by member: the same invoices, stored documents, columns, refusals
and errors, whether a member was checked in C or read by the converter. And the checked
path is the one taken for what the service sends: no model is built."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import attrs
import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from invoicing_async._models import export, stored
from invoicing_async._models.documents import MemberError, load_model
from invoicing_async._models.fields import field_specs, read_keys
from invoicing_async._models.payloads import dump_model
from invoicing_async._models.stored import InvoiceDocument, load_invoice_documents
from invoicing_async._wire.scalars import parse_date, parse_datetime
from invoicing_async.errors import DecodeError
from invoicing_async.models import Invoice, InvoiceDetail
from invoicing_async.testing import FakeInvoicingService
from invoicing_async.testing._writers import dump_list
from tests.unit.models.counting import invoices_made
from tests.unit.models.strategies import models


class Raw(str):
    """Text written into a test body as it is (numbers in any notation, deep nesting)."""


class Pairs(list[tuple[str, Any]]):
    """An object written with its keys in order, duplicates included."""


def write(value: Any) -> str:
    """JSON text of a test tree; strings escaped (lone surrogates as `\\udxxx`)."""
    if isinstance(value, Raw):
        return str(value)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | Decimal):
        return str(value)  # Decimal: '1E+999', '-0.000', … as JSON numbers
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{write(v)}" for k, v in value) + "}"
    if isinstance(value, dict):
        return write(Pairs(value.items()))
    return "[" + ",".join(write(v) for v in value) + "]"


def old_path(body: bytes) -> Any:
    """The converter alone, member by member: the C check never says yes."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stored, "checked_invoice", lambda raw, **_: None)
        return new_path(body)


def new_path(body: bytes) -> Any:
    try:
        docs, failed = load_invoice_documents(body, "json", limit=100, keep_values=True)
    except DecodeError as exc:
        return ("error", str(exc))
    for doc in docs:  # the columns are the model's, whichever path read the member
        values = doc.values()  # before the model is built: read from the document
        model = doc.model()
        columns = (model.id, model.revision, model.invoice_id, model.state, model.contact_id)
        assert (doc.id, doc.revision, doc.invoice_number, doc.state, doc.contact_id) == columns
        assert_values_read_as_the_model(values, model)
    return [d.model() for d in docs], [d.document for d in docs], failed


def assert_values_read_as_the_model(values: Any, model: Any) -> None:
    """`InvoiceDocument.values()` (the checked struct, or the model) holds the model's
    values by the same names, its lists' too (None for none): decimals as their text or
    integers, no `extra` in a struct (it fits only when the models know every field)."""
    kinds = export.scalar_columns(type(model))
    for name in attrs.fields_dict(type(model)):
        got: Any = getattr(values, name, {})
        want = getattr(model, name)
        if kinds.get(name) == "decimal" and got is not None:
            got = Decimal(got)
        if isinstance(want, list):
            for item, item_model in zip(got or [], want, strict=True):
                assert_values_read_as_the_model(item, item_model)
        else:
            assert got == want, name


def same_as_converter(body: bytes) -> None:
    assert new_path(body) == old_path(body)


# -- generated members: valid invoices, then bent where the check and the converter differ -

ODD_TEXT = (
    st.from_regex(r"-?[0-9]{1,70}(\.[0-9]{0,70})?", fullmatch=True)  # amounts, in and out of bounds
    | st.from_regex(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?"
        r"([Zz]|[+-][0-9]{2}:?[0-9]{2})?)?",
        fullmatch=True,
    )
    | st.sampled_from(["", " 12", "1_000", "true", "t", "no", "0x10", "NaN", "1e5", "٣"])
    | st.text(max_size=8)  # lone surrogates included
)
ODD_NUMBERS = (
    st.integers()
    | st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 0, 1, -1])
    | st.decimals(allow_nan=False, allow_infinity=False)
    | st.sampled_from([Raw("1e999999"), Raw("1E2"), Raw("-0.0"), Raw("9" * 4301), Raw("1" * 300)])
)
ODD_VALUES = st.recursive(
    st.none() | st.booleans() | ODD_NUMBERS | ODD_TEXT,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
) | st.sampled_from([Raw("[" * 3000 + "]" * 3000), Raw('"\\ud800"'), Raw('"\\udfff x"')])

INVOICE_KEYS = sorted({k for s in field_specs(Invoice) for k in read_keys(s)})
DETAIL_KEYS = sorted({k for s in field_specs(InvoiceDetail) for k in read_keys(s)})
UNKNOWN_KEYS = st.sampled_from(["tax_components", "sepa_active", "x", "invoice", "Id"])


def bent(tree: dict[str, Any], keys: list[str], data: st.DataObject) -> Pairs:
    """`tree` with up to three keys set to odd values (known names, their aliases,
    unknown names), removed, or given twice."""
    pairs = Pairs(tree.items())
    for _ in range(data.draw(st.integers(0, 3))):
        action = data.draw(st.sampled_from(["set", "add", "drop"]))
        key = data.draw(st.sampled_from(keys) | UNKNOWN_KEYS)
        if action == "drop":
            pairs[:] = [(k, v) for k, v in pairs if k != key]
            continue
        value = data.draw(ODD_VALUES)
        if action == "set" and any(k == key for k, _ in pairs):
            pairs[:] = [(k, value if k == key else v) for k, v in pairs]
        else:
            pairs.append((key, value))  # a new key, or the same key a second time
    return pairs


def member_tree(invoice: Invoice, data: st.DataObject) -> Any:
    tree = json.loads(dump_model(invoice, "json", mode="document"), parse_float=Decimal)["invoice"]
    details = tree.get("details") or []
    if details and data.draw(st.booleans()):
        index = data.draw(st.integers(0, len(details) - 1))
        details[index] = bent(details[index], DETAIL_KEYS, data)
    inner = bent(tree, INVOICE_KEYS, data)
    wrapping = data.draw(
        st.sampled_from(["invoice", "invoice", "invoice", "bare", "other", "extra"])
    )
    if wrapping == "bare":
        return inner
    if wrapping == "other":
        return {"recurring_template": inner}
    if wrapping == "extra":
        return Pairs([("invoice", inner), ("meta", 1)])
    return {"invoice": inner}


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(models(Invoice, extra=False), min_size=1, max_size=3), st.data())
def test_any_reply_reads_as_the_converter_reads_it(
    invoices: list[Invoice], data: st.DataObject
) -> None:
    body = write([member_tree(invoice, data) for invoice in invoices]).encode()
    same_as_converter(body)


@pytest.mark.parametrize(
    "member",
    [
        '{"invoice":{"id":1,"x":1e999999}}',  # an exponent past the bounds, in an unknown field
        '{"invoice":{"id":1,"x":' + "9" * 4301 + "}}",  # past the interpreter's int limit
        '{"invoice":{"id":1,"x":0.' + "0" * 120 + "1}}",  # a fraction too small
        '{"invoice":{"id":1,"x":"\\ud800"}}',  # a lone surrogate the converter refuses
        '{"invoice":{"id":1,"x":' + "[" * 5000 + "]" * 5000 + "}}",  # too deep
        '{"invoice":{"id":1,"invoice_id":"A","invoice-id":"B"}}',  # an alias, later
        '{"invoice":{"id":1,"invoice-id":null,"invoice_id":"A"}}',
        '{"invoice":{"id":1,"id":2}}',  # a key twice: the last one counts
        '{"invoice":{"id":1,"details_attributes":[{"price":"x"}]}}',  # the request name
        '{"invoice":{"id":1,"total_paid":1.5}}',  # a decimal as a JSON number
        '{"invoice":{"id":"7","revision":"12"}}',  # integers as text
        '{"invoice":{"id":9223372036854775808}}',  # past 64 bits
        '{"invoice":{"id":1,"created_at":"2024-02-30T10:00:00Z"}}',
        '{"invoice":{"id":1,"created_at":"2024-01-01t10:00:00z"}}',
        '{"invoice":{"id":1,"invoice_date":""}}',
        '{"invoice":{"id":1,"details":""}}',
        '{"invoice":{"id":1,"details":[{"_destroy":true,"destroy":false}]}}',
        '{"invoice":{"id":1,"total_paid":"' + "1" * 61 + '"}}',
        '{"invoice":"text"}',
        '{"id":3,"revision":4}',  # bare: stored as encoded
        '{"payment":{"id":3}}',  # another root: that member is set aside
        "[1,2]",
        "5",
    ],
)
def test_edge_members_read_as_the_converter_reads_them(member: str) -> None:
    same_as_converter(f'[{member},{{"invoice":{{"id":42,"revision":1}}}}]'.encode())


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{}",
        b"[",
        b'[{"invoice":{"id":1}}] x',
        b'[{"invoice":{"id":1,"x":"\xed\xa0\x80"}}]',  # a surrogate in UTF-8 bytes
        b'[{"invoice":{"id":1,"x":"\xff"}}]',
        b'[{"invoice":{"id":1}},{"\x80":1}]',  # a key that is not UTF-8
        '[{"invoice":{"id":1}}]'.encode("utf-16"),
        b"\xef\xbb\xbf" + b'[{"invoice":{"id":1}}]',
        b"[NaN]",
        b"[]",
        b" [ ] ",
    ],
)
def test_odd_bodies_read_as_the_converter_reads_them(body: bytes) -> None:
    same_as_converter(body)


# -- the check accepts nothing the converter's scalars refuse ------------------------------

LOOSE_DATETIMES = st.from_regex(
    r"[0-9]{1,5}-[0-9]{1,3}-[0-9]{1,3}([Tt _][0-9]{1,3}(:[0-9]{1,3}(:[0-9]{1,3}([.,][0-9]{0,12})?)?)?)?"
    r"([Zz]|[+-][0-9]{1,3}(:?[0-9]{1,3}(:[0-9]{2})?)?)?",
    fullmatch=True,
)


@settings(deadline=None)
@given(LOOSE_DATETIMES | st.text(max_size=30) | st.datetimes().map(str))
@example("2024-01-01T10:00:00.9999999Z")
@example("0001-01-01T00:00:00+01:00")
@example("9999-12-31T23:59:59-01:00")
def test_a_time_the_check_accepts_is_one_the_converter_reads(text: str) -> None:
    for kind, parse in ((dt.datetime, parse_datetime), (dt.date, parse_date)):
        try:
            msgspec.convert(text, kind)
        except msgspec.ValidationError:
            continue
        parse(text)  # raises DecodeError if the converter refuses what the check took


# -- the checked path is the one taken -----------------------------------------------------


def test_what_the_service_sends_is_stored_without_building_a_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service = FakeInvoicingService(invoices=60, seed=3)
    invoices = list(service.account.invoices.values())
    body = dump_list(invoices, "json", Invoice)
    built = invoices_made(monkeypatch)
    docs, failed = load_invoice_documents(body, "json", limit=100)
    assert failed == []
    assert built == []  # checked in C: no converter, no model
    assert all(doc._model is None for doc in docs)  # noqa: SLF001
    assert [doc.document for doc in docs] == [
        json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode() for m in json.loads(body)
    ]
    assert [doc.model() for doc in docs] == invoices  # built now, when asked
    assert len(built) == 60


def test_documents_keep_their_checked_values_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A consumer that reads every value (the dlt source) asks to keep the struct each
    member was checked with and reads it without a model; a store's documents hold none
    (it would be held for nothing), and their values are the model's."""
    service = FakeInvoicingService(invoices=5, seed=3)
    body = dump_list(list(service.account.invoices.values()), "json", Invoice)
    built = invoices_made(monkeypatch)
    kept, _ = load_invoice_documents(body, "json", limit=100, keep_values=True)
    assert [doc.values().id for doc in kept] == [doc.id for doc in kept]
    assert built == []
    plain, _ = load_invoice_documents(body, "json", limit=100)
    assert all(doc._checked is None for doc in plain)  # noqa: SLF001
    assert [doc.values() for doc in plain] == [doc.model() for doc in kept]
    assert len(built) == 10


def test_fields_beyond_the_specification_keep_the_checked_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real service sends fields the models do not know (field notes): they must not
    send every invoice down the slow path. They land in `extra`, as before."""
    service = FakeInvoicingService(invoices=5, seed=3)
    trees = json.loads(dump_list(list(service.account.invoices.values()), "json", Invoice))
    for tree in trees:
        tree["invoice"]["tax_components"] = [{"rate": "21.0", "amount": 3}]
        tree["invoice"]["sepa_active"] = False
        tree["invoice"]["sender_address"] = {"city": "Utrecht", "lines": ["a", None, 1.25]}
        for detail in tree["invoice"]["details"]:
            detail["amount_plain"] = "1"
            detail["tax"] = 0.21
    body = json.dumps(trees).encode()
    built = invoices_made(monkeypatch)
    docs, failed = load_invoice_documents(body, "json", limit=100)
    assert failed == []
    assert built == []
    model = docs[0].model()
    assert model.extra["sepa_active"] is False
    assert model.extra["sender_address"]["lines"][2] == Decimal("1.25")
    assert model.details[0].extra == {"amount_plain": "1", "tax": Decimal("0.21")}
    same_as_converter(body)


def test_an_unreadable_member_is_set_aside_with_its_id_and_field() -> None:
    body = b'[{"invoice":{"id":1,"revision":5}},{"invoice":{"id":2,"total_paid":"abc"}}]'
    docs, failed = load_invoice_documents(body, "json", limit=100)
    assert [d.id for d in docs] == [1]
    assert failed == [MemberError(ident=2, error=failed[0].error)]
    assert "total_paid" in failed[0].error


def test_a_document_from_a_model_holds_that_model() -> None:
    invoice = Invoice(id=3, revision=9, invoice_id="2014-0096", state="open", contact_id=4)
    doc = InvoiceDocument.of(invoice)
    assert (doc.id, doc.revision, doc.invoice_number, doc.state, doc.contact_id) == (
        3,
        9,
        "2014-0096",
        "open",
        4,
    )
    assert doc.model() is invoice
    assert load_model(doc.document, "json", Invoice) == invoice


@pytest.mark.parametrize("key", ["x\\udfff", "\\ud800"])
def test_a_lone_surrogate_in_an_unknown_field_name_sets_its_invoice_aside(key: str) -> None:
    """A field name no store can keep (PostgreSQL's upsert refused it, failing the whole
    batch): that member alone is set aside, its neighbours are stored."""
    body = (
        '[{"invoice":{"id":1,"revision":5}},'
        f'{{"invoice":{{"id":2,"revision":1,"{key}":1}}}},'
        f'{{"invoice":{{"id":3,"revision":2,"details":[{{"id":4,"{key}":1}}]}}}}]'
    ).encode()
    docs, failed = load_invoice_documents(body, "json", limit=100)
    assert [d.id for d in docs] == [1]
    assert [f.ident for f in failed] == [2, 3]
    assert all("lone surrogate" in f.error for f in failed)
