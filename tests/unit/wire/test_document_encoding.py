"""Stored documents are written by orjson; these pin them to the bytes `json.dumps` wrote
before, so documents stored by earlier releases and by this one are alike."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from invoicing_async._models.documents import load_model
from invoicing_async._wire.json import encode_json, json_text
from invoicing_async._wire.xml import decode_xml
from invoicing_async.models import Invoice
from invoicing_async.testing._writers import dump_list
from tests.unit.models.strategies import OFFSETS, models


def _json_dumps(root: str, member: Any) -> bytes:
    """The writer stored documents had before orjson."""
    return json.dumps(
        {root: member}, default=json_text, ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8", "surrogatepass")


@settings(deadline=None)
@given(st.lists(models(Invoice), min_size=1, max_size=3))
def test_decoded_xml_invoices_are_stored_as_json_dumps_wrote_them(
    invoices: list[Invoice],
) -> None:
    _, members = decode_xml(dump_list(invoices, "xml", Invoice))
    for member, invoice in zip(members, invoices, strict=True):
        stored = encode_json("invoice", member)
        assert stored == _json_dumps("invoice", member)
        assert load_model(stored, "json", Invoice) == load_model(
            _json_dumps("invoice", member), "json", Invoice
        )
        assert load_model(stored, "json", Invoice).id == invoice.id


# Any text (control characters, U+2028, astral planes, lone surrogates), integers past
# 64 bits, every kind of value a decoded member holds.
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.decimals(allow_nan=False, allow_infinity=False)
    | st.dates()
    | st.datetimes(timezones=OFFSETS)
    | st.datetimes()
)
TREES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(deadline=None)
@given(st.dictionaries(st.text(), TREES, max_size=6))
def test_any_decoded_value_is_written_as_json_dumps_wrote_it(member: dict[str, Any]) -> None:
    assert encode_json("invoice", member) == _json_dumps("invoice", member)


def test_values_orjson_refuses_go_through_json_dumps() -> None:
    member = {"x_big": 2**80, "x_lone": "a\ud800b", "total": Decimal("-0.00")}
    stored = encode_json("invoice", member)
    assert stored == _json_dumps("invoice", member)
    assert b"1208925819614629174706176" in stored


def test_amounts_and_times_keep_their_exact_form() -> None:
    member = {
        "price": Decimal("6.05E+1"),
        "tiny": Decimal("1E-7"),
        "at": dt.datetime(2026, 1, 2, 3, 4, 5, 60, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
        "on": dt.date(999, 1, 1),
    }
    assert encode_json("invoice", member) == (
        b'{"invoice":{"price":"60.5","tiny":"0.0000001",'
        b'"at":"2026-01-02T03:04:05.000060-05:00","on":"0999-01-01"}}'
    )
