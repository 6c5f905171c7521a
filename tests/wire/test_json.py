from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

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
