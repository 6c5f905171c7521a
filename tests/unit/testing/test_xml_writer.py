"""The fast XML writer writes exactly what `encode_xml` (xmltodict) writes."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from invoicing_async._models.payloads import to_wire
from invoicing_async._wire.xml import PlainList, encode_xml
from invoicing_async.testing import FakeInvoicingService
from invoicing_async.testing._xml_writer import XML_DECLARATION, xml_element


def written(root: str, data: dict[str, Any]) -> bytes:
    return (XML_DECLARATION + xml_element(root, data)).encode("utf-8")


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
def test_same_bytes_as_encode_xml(data: dict[str, Any]) -> None:
    assert written("invoice", data) == encode_xml("invoice", data)


def test_names_xmltodict_treats_specially_fall_back_to_it() -> None:
    data = {"@type": "odd", "#text": "body", "plain": "x"}
    assert written("thing", data) == encode_xml("thing", data)
    with pytest.raises(ValueError, match="whitespace"):
        xml_element("thing", {"bad name": 1})
    with pytest.raises(TypeError):
        xml_element("thing", {"what": object()})


@pytest.mark.parametrize("seed", [0, 1, 2014])
def test_generated_invoices_are_written_alike(seed: int) -> None:
    service = FakeInvoicingService(invoices=300, seed=seed)
    for invoice in service.account.invoices.values():
        data = to_wire(invoice, fmt="xml", mode="document")
        assert written("invoice", data) == encode_xml("invoice", data)
