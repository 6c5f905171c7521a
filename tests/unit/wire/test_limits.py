"""Memory bombs in small responses: huge exponents and element floods are a `DecodeError`
naming the limit, before they can cost memory."""

from __future__ import annotations

import gzip
from decimal import Decimal

import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._models.documents import load_list, load_model
from invoicing_async._wire import scalars, xml_kinds
from invoicing_async._wire.json import decode_json
from invoicing_async._wire.scalars import MAX_ELEMENTS
from invoicing_async._wire.xml import decode_xml


@pytest.mark.parametrize("number", ["1e99999999999", "1e99999999", "-1E101", "1e-101", "9.5e+200"])
def test_decimal_exponents_beyond_the_bound(number: str) -> None:
    with pytest.raises(ia.DecodeError, match="out of range"):
        load_model(f'{{"invoice": {{"exchange_rate": {number}}}}}'.encode(), "json", m.Invoice)
    with pytest.raises(ia.DecodeError, match="out of range"):
        load_model(f'{{"invoice": {{"total_paid": "{number}"}}}}'.encode(), "json", m.Invoice)
    xml = f'<invoice><total-paid type="decimal">{number}</total-paid></invoice>'
    with pytest.raises(ia.DecodeError, match="out of range"):
        load_model(xml.encode(), "xml", m.Invoice)


def test_ordinary_numbers_still_decode() -> None:
    invoice = load_model(
        b'{"invoice": {"exchange_rate": 1.5e2, "total_paid": "1E+3", "discount": 0.21}}',
        "json",
        m.Invoice,
    )
    assert (invoice.exchange_rate, invoice.total_paid) == (Decimal(150), Decimal(1000))
    assert str(invoice.discount) == "0.21"


def test_a_json_flood_is_refused_before_parsing() -> None:
    body = b"[" + b"{}," * (MAX_ELEMENTS + 1) + b"{}]"
    assert len(gzip.compress(body, compresslevel=1)) < 200_000  # what travels is small
    with pytest.raises(ia.DecodeError, match="limit"):
        decode_json(body)
    with pytest.raises(ia.DecodeError, match="limit"):
        load_list(body, "json", m.Invoice)


def test_an_xml_flood_is_refused_once_it_passes_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The count and the refusal at a small limit (the real one, 10 million elements, is
    tests/integration/reliability/test_xml_flood.py: slow)."""
    for module in (scalars, xml_kinds):
        monkeypatch.setattr(module, "MAX_ELEMENTS", 1_000)
    assert decode_xml(b'<invoices type="array">' + b"<i/>" * 998 + b"</invoices>")
    with pytest.raises(ia.DecodeError, match="limit of 1,000"):
        decode_xml(b'<invoices type="array">' + b"<i/>" * 1_000 + b"</invoices>")
