from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from invoicing_async._wire.xml import PlainList, decode_xml, encode_xml, member_name
from invoicing_async.errors import DecodeError

RAILS_INVOICE = b"""<?xml version="1.0" encoding="UTF-8"?>
<invoice>
  <id type="integer">42</id>
  <total-price-incl-tax type="decimal">181.5</total-price-incl-tax>
  <exchange-rate type="float">1.0</exchange-rate>
  <show-tax type="boolean">true</show-tax>
  <invoice-date type="date">2014-07-30</invoice-date>
  <created-at type="datetime">2014-07-30T17:33:41+02:00</created-at>
  <updated-at type="dateTime">2014-07-30T15:33:41Z</updated-at>
  <po-number nil="true"/>
  <description></description>
  <attachment type="IncomingInvoiceAttachment">scan.pdf</attachment>
  <details type="array">
    <detail>
      <id type="integer">5</id>
      <description>  spaced  </description>
    </detail>
  </details>
  <payments type="array"/>
  <history type="array">
    <history><action>invoice_sent_hand</action></history>
    <history><action>invoice_created</action></history>
  </history>
</invoice>
"""


def test_typed_scalars_nil_and_empty() -> None:
    root, value = decode_xml(RAILS_INVOICE)
    assert root == "invoice"
    assert value["id"] == 42
    assert value["total-price-incl-tax"] == Decimal("181.5")
    assert isinstance(value["exchange-rate"], Decimal)  # float type: still exact
    assert value["show-tax"] is True
    assert value["invoice-date"] == dt.date(2014, 7, 30)
    created = value["created-at"]
    assert created.utcoffset() == dt.timedelta(hours=2)
    assert value["updated-at"] == dt.datetime(2014, 7, 30, 15, 33, 41, tzinfo=dt.timezone.utc)
    assert value["po-number"] is None
    assert value["description"] == ""
    assert value["attachment"] == "scan.pdf"  # unknown type means string


def test_one_member_array_is_a_list() -> None:
    _, value = decode_xml(RAILS_INVOICE)
    assert value["details"] == [{"id": 5, "description": "  spaced  "}]
    assert value["payments"] == []
    assert [h["action"] for h in value["history"]] == ["invoice_sent_hand", "invoice_created"]


def test_list_root_with_zero_one_and_many_members() -> None:
    assert decode_xml(b'<invoices type="array"/>') == ("invoices", [])
    one = b'<invoices type="array"><invoice><id type="integer">1</id></invoice></invoices>'
    assert decode_xml(one) == ("invoices", [{"id": 1}])
    many = one.replace(b"</invoices>", b"<invoice><id type='integer'>2</id></invoice></invoices>")
    assert decode_xml(many) == ("invoices", [{"id": 1}, {"id": 2}])


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"<invoice><id type='integer'>4", "malformed XML"),
        (b"<invoice></details>", "mismatched tag"),
        (b"", "malformed XML"),
        (b"<invoice><id type='integer'>x1</id></invoice>", "not an integer"),
        (b"<invoice><d type='date'>2014-13-45</d></invoice>", "not a date"),
        (b"<invoice><d type='decimal'>12,5</d></invoice>", "not a decimal"),
        (b"<invoice><d type='boolean'>maybe</d></invoice>", "not a boolean"),
        (b"<invoice><d type='decimal'>NaN</d></invoice>", "finite"),
        (b"<?xml version='1.0' encoding='tf-8'?><invoice/>", "encoding"),  # found by the fuzzer
    ],
)
def test_bad_documents_raise_decode_error(body: bytes, fragment: str) -> None:
    with pytest.raises(DecodeError, match=fragment):
        decode_xml(body)


def test_truncated_body_reports_position() -> None:
    with pytest.raises(DecodeError) as info:
        decode_xml(RAILS_INVOICE[:200])
    assert info.value.position is not None
    assert info.value.position[0] > 1
    assert "line" in str(info.value)


def test_billion_laughs_is_refused() -> None:
    bomb = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<invoice><po-number>&lol3;</po-number></invoice>"""
    with pytest.raises(DecodeError, match="entities"):
        decode_xml(bomb)


def test_external_entity_is_refused() -> None:
    xxe = b"""<?xml version="1.0"?>
<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><invoice><a>&x;</a></invoice>"""
    with pytest.raises(DecodeError):
        decode_xml(xxe)


def test_encode_types_arrays_and_nil() -> None:
    body = encode_xml(
        "invoice",
        {
            "contact-id": 7,
            "discount": Decimal("17.50"),
            "prices-are-incl-tax": False,
            "invoice-date": dt.date(2014, 7, 31),
            "po-number": None,
            "details-attributes": [{"id": 5, "_destroy": True}],
        },
    )
    text = body.decode()
    assert '<contact-id type="integer">7</contact-id>' in text
    assert '<discount type="decimal">17.50</discount>' in text
    assert '<prices-are-incl-tax type="boolean">false</prices-are-incl-tax>' in text
    assert '<invoice-date type="date">2014-07-31</invoice-date>' in text
    assert '<po-number nil="true"/>' in text
    assert (
        '<details-attributes type="array"><detail><id type="integer">5</id>'
        '<_destroy type="boolean">true</_destroy></detail></details-attributes>'
    ) in text


def test_encode_decimal_never_in_exponent_form() -> None:
    body = encode_xml("payment", {"price": Decimal("6.05E+1")})
    assert b'<price type="decimal">60.5</price>' in body


@pytest.mark.parametrize(
    "text", ["a & b", "<tag>", "€ 100", "quote \" and '", "  spaces  ", "\u00e9\u4e2d"]
)
def test_special_characters_round_trip(text: str) -> None:
    body = encode_xml("invoice", {"po-number": text})
    assert decode_xml(body) == ("invoice", {"po-number": text})


def test_sync_fetch_body_has_one_ids_element() -> None:
    body = encode_xml("invoices", {"ids": PlainList("id", ["1", "2"])})
    assert body.endswith(b"<invoices><ids><id>1</id><id>2</id></ids></invoices>")


def test_member_names() -> None:
    assert member_name("details-attributes") == "detail"
    assert member_name("history") == "history"
    assert member_name("invoices") == "invoice"
    assert member_name("tax-components") == "tax-component"
    assert member_name("entries") == "entry"
