from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing_async._wire.json import decode_json, encode_json
from invoicing_async.errors import DecodeError


def test_fractions_become_exact_decimals() -> None:
    value = decode_json(b'{"a": 0.1, "b": "60.5", "c": 1, "d": 1234567890.123456789012345}')
    assert value["a"] == Decimal("0.1")
    assert type(value["a"]) is Decimal
    assert value["d"] == Decimal("1234567890.123456789012345")
    assert value["c"] == 1


@pytest.mark.parametrize(
    "body", [b'{"a": 1', b"[1, 2,]", b"\xff\xfe", b'{"a": NaN}', b'{"a": ' + b"9" * 5000 + b"}"]
)
def test_bad_json_raises_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_json(body)


def test_malformed_json_reports_position() -> None:
    with pytest.raises(DecodeError) as info:
        decode_json(b'{\n "invoice": {"id": }\n}')
    assert info.value.position == (2, 20)


def test_encode_wraps_root_and_keeps_decimals_exact() -> None:
    body = encode_json(
        "payment",
        {"price": Decimal("60.50"), "payment_date": dt.date(2014, 7, 31), "note": "€"},
    )
    assert body == '{"payment":{"price":"60.50","payment_date":"2014-07-31","note":"€"}}'.encode()


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@given(items=st.lists(_values, max_size=6), blanks=st.sampled_from(["", " ", "\n\t "]))
def test_a_large_list_decoded_member_by_member_equals_json_loads(
    items: list[object], blanks: str
) -> None:
    """Bodies over 64 KB are parsed one member at a time: same result, same failures."""
    text = json.dumps(items, separators=(blanks + "," + blanks, ": "))
    padding = " " * 70_000
    large = (padding + text + padding).encode()
    assert decode_json(large) == decode_json(text.encode()) == json.loads(text)
    if items:
        with pytest.raises(DecodeError):
            decode_json((text[:-1] + padding).encode())  # no closing bracket
        with pytest.raises(DecodeError, match="Extra data"):
            decode_json((padding + text + padding + "[]").encode())
