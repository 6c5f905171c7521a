"""`encode_xml` writes exactly what the former xmltodict writer wrote."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from invoicing_async._models.payloads import to_wire
from invoicing_async._wire.xml import XML_DECLARATION, PlainList, encode_xml, xml_element
from invoicing_async.testing import FakeInvoicingService
from tests.unit.wire.xmltodict_reference import reference_encode_xml


def written(root: str, data: dict[str, Any]) -> bytes:
    body = encode_xml(root, data)
    assert body == (XML_DECLARATION + xml_element(root, data)).encode("utf-8")
    return body


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"text": "a & b < c > d \"quoted\" 'single'", "empty": "", "none": None},
        {"crlf": "line one\r\nline two\rthree", "unicode": "Café Ñandú € \U0001f600"},
        {"yes": True, "no": False, "n": 0, "big": -(10**30), "d": Decimal("12.50")},
        {"f": 1.5, "when": dt.datetime(2014, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)},
        {"day": dt.date(2014, 1, 2), "nested": {"inner": {"deep": "x"}, "blank": {}}},
        {"details": [{"a": 1}, {}], "history": [{"b": None}], "entries": [], "ids": [1, 2]},
        {"matrix": [[1, 2], [], [["x"]]], "tuple": (Decimal("1"), "y")},
        {"ids": PlainList("id", ["1", "2"]), "none": PlainList("x", [])},
    ],
)
def test_same_bytes_as_xmltodict(data: dict[str, Any]) -> None:
    assert written("invoice", data) == reference_encode_xml("invoice", data)


@pytest.mark.parametrize("name", ["bad name", "@type", "#text", "", "a<b"])
def test_what_is_no_element_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="not an XML element name"):
        encode_xml("thing", {name: 1})


def test_a_value_of_no_known_type_is_refused() -> None:
    with pytest.raises(TypeError):
        encode_xml("thing", {"what": object()})


@pytest.mark.parametrize("seed", [0, 1, 2014])
def test_generated_invoices_are_written_alike(seed: int) -> None:
    service = FakeInvoicingService(invoices=300, seed=seed)
    for invoice in service.account.invoices.values():
        data = to_wire(invoice, fmt="xml", mode="document")
        assert written("invoice", data) == reference_encode_xml("invoice", data)


@pytest.mark.parametrize(
    "data",
    [
        [{"id": 1, "revision": 2}, {}],
        [],
        PlainList("error", [{"attribute": None, "message": "can't be blank"}, "plain"]),
    ],
)
def test_a_list_or_plain_list_as_the_root(data: Any) -> None:
    assert encode_xml("invoices", data) == reference_encode_xml("invoices", data)
