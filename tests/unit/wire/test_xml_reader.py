"""The pyexpat reader against the xmltodict decoder it replaced, chunk by chunk; its limits."""

from __future__ import annotations

import inspect
import sys
import tracemalloc
from typing import Any
from xml.parsers.expat import ParserCreate
from xml.sax.saxutils import escape, quoteattr

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invoicing_async._wire import scalars, xml_kinds
from invoicing_async._wire.xml import decode_xml, decode_xml_members
from invoicing_async._wire.xml_reader import MAX_DEPTH, ElementCount, XmlReader
from invoicing_async.errors import DecodeError
from tests.unit.wire.test_xml import RAILS_INVOICE
from tests.unit.wire.xmltodict_reference import reference_decode_xml, reference_members

MANY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Attribute sets Rails writes, and the odd ones the decoder must still agree on.
ATTRIBUTES = st.sampled_from(
    [
        (),
        (("type", "integer"),),
        (("type", "decimal"),),
        (("type", "float"),),
        (("type", "boolean"),),
        (("type", "date"),),
        (("type", "datetime"),),
        (("type", "array"),),
        (("type", "Attachment"),),
        (("type", ""),),
        (("nil", "true"),),
        (("nil", "false"),),
        (("type", "integer"), ("nil", "true")),
        (("nil", "true"), ("type", "array")),
        (("type", "array"), ("nil", "false")),
        (("lang", "en"),),
        (("type", "integer"), ("lang", "en")),
    ]
)
NAMES = st.sampled_from(["a", "b", "id", "detail", "details", "x-y", "history"])
TEXTS = st.one_of(
    st.sampled_from(["1", "-7", " 42 ", "2.5", "1e3", "true", "no", "2014-07-30", "", "  "]),
    st.sampled_from(["2014-07-30T17:33:41+02:00", "2014-07-30T15:33:41Z", "x&y", "<a>", "€"]),
    st.text(alphabet="01 9.-eTZ:\n\tab&<", max_size=6),
)


@st.composite
def elements(draw: st.DrawFn, depth: int = 0, *, bare: bool = False) -> str:
    """An element (`bare`: without attributes itself), nested up to four levels."""
    name = draw(NAMES)
    attrs = "" if bare else "".join(f" {k}={quoteattr(v)}" for k, v in draw(ATTRIBUTES))
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 3 if depth < 3 else 0))):
        if draw(st.booleans()):
            parts.append(escape(draw(TEXTS)))
        else:
            parts.append(draw(elements(depth + 1)))
    if not parts and draw(st.booleans()):
        return f"<{name}{attrs}/>"
    return f"<{name}{attrs}>{''.join(parts)}</{name}>"


DOCUMENTS = st.builds(
    lambda prolog, root: (prolog + root).encode(),
    st.sampled_from(["", '<?xml version="1.0" encoding="UTF-8"?>\n']),
    elements(),
)


def outcome(decode: Any, body: bytes) -> Any:
    """The value, or the error's message and position: what callers can observe."""
    try:
        return decode(body)
    except DecodeError as exc:
        return ("DecodeError", str(exc), exc.position)


def fed(body: bytes, cuts: list[int], *, members: bool = False) -> tuple[str | None, Any]:
    """`body` through an `XmlReader` in the pieces `cuts` make."""
    reader = XmlReader(members=members)
    got: list[Any] = []
    start = 0
    for cut in [*sorted(cuts), len(body)]:
        got.extend(reader.feed(body[start:cut]))
        start = cut
    got.extend(reader.close())
    return reader.root, (got if members else reader.value)


@MANY
@given(body=DOCUMENTS)
def test_same_values_and_errors_as_xmltodict(body: bytes) -> None:
    assert outcome(decode_xml, body) == outcome(reference_decode_xml, body)


@MANY
@given(body=DOCUMENTS, data=st.data())
def test_broken_documents_fail_alike(body: bytes, data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(body)))
    cut = body[:at] + data.draw(st.sampled_from([b"", b"<", b"</q>", b"&", b"\xff"])) + body[at:]
    assert outcome(decode_xml, cut) == outcome(reference_decode_xml, cut)


@MANY
@given(data=st.data())
def test_members_as_before(data: st.DataObject) -> None:
    """Each child of the root on its own, as the xmltodict streaming did it (which lost the
    text of a member with attributes: compared where the members have none)."""
    root = data.draw(st.sampled_from(["<list>", '<list type="array">', '<list nil="true">']))
    members = data.draw(st.lists(elements(1, bare=True) | TEXTS.map(escape), max_size=4))
    doc = (root + "".join(members) + "</list>").encode()

    def ours(b: bytes) -> tuple[str, list[Any]]:
        got: list[Any] = []
        return decode_xml_members(b, got.append), got

    assert outcome(ours, doc) == outcome(reference_members, doc)


@MANY
@given(body=DOCUMENTS, data=st.data())
def test_any_chunks_give_the_same_result(body: bytes, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=6))
    whole = outcome(lambda b: fed(b, []), body)
    assert outcome(lambda b: fed(b, cuts), body) == whole
    members = outcome(lambda b: fed(b, [], members=True), body)
    assert outcome(lambda b: fed(b, cuts, members=True), body) == members


def test_every_split_point_of_a_rails_invoice() -> None:
    expected = decode_xml(RAILS_INVOICE)
    for at in range(len(RAILS_INVOICE) + 1):
        assert fed(RAILS_INVOICE, [at]) == expected, at
    one_byte_at_a_time = list(range(len(RAILS_INVOICE)))
    assert fed(RAILS_INVOICE, one_byte_at_a_time) == expected


def test_members_come_out_as_they_close() -> None:
    reader = XmlReader(members=True)
    assert reader.feed(b'<invoices type="array"><invoice><id type="integer">1</id>') == []
    assert reader.feed(b"</invoice><invoice><id type") == [{"id": 1}]
    assert reader.feed(b'="integer">2</id></invoice></invoices>') == [{"id": 2}]
    assert reader.close() == []
    assert reader.root == "invoices"


def test_on_root_sees_the_root_before_the_first_member() -> None:
    seen: list[str] = []

    def refuse(name: str) -> None:
        seen.append(name)
        raise DecodeError("not a list of invoices")

    reader = XmlReader(members=True, on_root=refuse)
    with pytest.raises(DecodeError, match="not a list"):
        reader.feed(b'<contacts type="array"><contact><id type="integer">x</id>')
    assert seen == ["contacts"]
    with pytest.raises(DecodeError, match="after a failure"):
        reader.feed(b"</contact>")


def test_a_typed_member_keeps_its_text() -> None:
    """xmltodict's streaming dropped it (members were None); now as `decode_xml` reads it."""
    got: list[Any] = []
    decode_xml_members(b'<ids type="array"><id type="integer">7</id></ids>', got.append)
    assert got == [7]


def test_depth_limit() -> None:
    ok = b"<a>" * MAX_DEPTH + b"x" + b"</a>" * MAX_DEPTH
    assert decode_xml(ok)[0] == "a"
    deep = b"<a>" * (MAX_DEPTH + 1) + b"</a>" * (MAX_DEPTH + 1)
    with pytest.raises(DecodeError, match=f"more than {MAX_DEPTH} levels"):
        decode_xml(deep)
    with pytest.raises(DecodeError, match="nested too deeply"):
        decode_xml_members(deep, lambda _: None)
    typed = b'<a type="integer">' + b"<a>" * MAX_DEPTH + b"</a>" * MAX_DEPTH + b"</a>"
    with pytest.raises(DecodeError, match="nested too deeply"):
        decode_xml(typed)  # also inside a scalar, whose children are otherwise dropped


def _judged(body: bytes) -> list[Any]:
    got: list[Any] = []
    decode_xml_members(body, got.append, judge_members=True)
    return got


def test_a_judged_member_nested_too_deep_is_a_bad_member_of_its_own() -> None:
    """The field holding the deep part stands as the failure; the member is read on (its
    id after the deep part too) and so are its neighbours. Unjudged (a list reply), the
    document is refused, as JSON's list route refuses it."""
    deep = b"<a>" * MAX_DEPTH + b"</a>" * MAX_DEPTH
    body = (
        b'<invoices type="array"><invoice><id type="integer">1</id></invoice>'
        b'<invoice><x><y>%s</y></x><x>2</x><id type="integer">2</id></invoice>'
        b'<invoice><id type="integer">3</id></invoice></invoices>'
    ) % deep
    first, bad, last = _judged(body)
    assert (first, last) == ({"id": 1}, {"id": 3})
    assert isinstance(bad, xml_kinds.BadMember)
    assert (bad.path, str(bad.error)) == ("x", f"nested more than {MAX_DEPTH} levels deep")
    assert bad.value["id"] == 2
    assert bad.value["x"][1] == "2"  # a repeated field: the deep one is the failure
    with pytest.raises(DecodeError, match="nested too deeply"):
        decode_xml_members(body, lambda _: None)
    # Just within the limit: read whole, judged or not.
    ok = b"<a>" * (MAX_DEPTH - 3) + b"</a>" * (MAX_DEPTH - 3)
    fine = b'<invoices type="array"><invoice><x>%s</x></invoice></invoices>' % ok
    assert _judged(fine) == reference_members(fine)[1]


def _peak(decode: Any, body: bytes) -> int:
    tracemalloc.start()
    try:
        decode(body)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _expat_only(body: bytes) -> None:
    ParserCreate().Parse(body, True)


def test_a_member_nested_ten_thousand_deep_is_skipped_not_built() -> None:
    """Without recursion, and at no memory beyond what expat itself holds for the open
    tags: the deep elements are counted, never built."""
    depth = 10_000
    plain = b'<invoice><id type="integer">%d</id><z>%s</z></invoice>'
    rest = b"".join(plain % (i, b"x" * 20) for i in range(250))
    deep = b"<a>" * depth + b"</a>" * depth
    body = b'<invoices type="array">%s%s</invoices>' % (plain % (250, deep), rest)
    clean = b'<invoices type="array">%s%s</invoices>' % (plain % (250, b""), rest)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 50)
    try:
        got = _judged(body)
    finally:
        sys.setrecursionlimit(limit)
    assert len(got) == 251
    assert isinstance(got[0], xml_kinds.BadMember)
    assert got[0].value["id"] == 250
    extra = _peak(_judged, body) - _peak(_judged, clean)
    expat_extra = _peak(_expat_only, body) - _peak(_expat_only, clean)
    assert extra < expat_extra + 64 * 1024  # a built tree: ~200 bytes a level, 2 MB


@pytest.mark.parametrize(
    "body",
    [
        b'<!DOCTYPE r [<!ENTITY e "x">]><r>&e;</r>',
        b'<!DOCTYPE r SYSTEM "http://example.com/r.dtd"><r>&e;</r>',
        b'<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>',
        b'<!DOCTYPE r [<!ENTITY % p "x"> %p;]><r/>',
        b"<!DOCTYPE r><r/>",
    ],
)
def test_entities_and_doctypes_are_refused(body: bytes) -> None:
    with pytest.raises(DecodeError, match="refused XML: entities are disabled"):
        decode_xml(body)
    for at in range(len(body)):  # wherever the declaration is split
        with pytest.raises(DecodeError, match="refused XML"):
            fed(body, [at])


def test_an_undeclared_entity_is_malformed() -> None:
    with pytest.raises(DecodeError, match="undefined entity") as info:
        decode_xml(b"<r>&e;</r>")
    assert info.value.position == (1, 3)


def test_element_count_is_kept_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xml_kinds, "MAX_ELEMENTS", 10)
    monkeypatch.setattr(scalars, "MAX_ELEMENTS", 10)
    body = b"<r>" + b"<i>1</i>" * 9 + b"</r>"  # 10 elements: at the limit
    assert fed(body, list(range(len(body))))[1] == {"i": ["1"] * 9}
    flood = b"<r>" + b"<i/>" * 10 + b"</r>"
    reader = XmlReader()
    with pytest.raises(DecodeError, match="limit of 10"):
        reader.feed(flood)  # refused before it is parsed


def test_element_count_of_split_end_tags() -> None:
    count = ElementCount()
    for piece in (b"<a><b>x<", b"/b><", b"/a>"):
        count.add(piece)
    assert count.count == 2
