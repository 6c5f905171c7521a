"""The XML sync list has one reader: every shape the sync list may take on the wire gives the
pairs the rules say, and anything else a `DecodeError` naming what is wrong."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invoicing_async._models.documents import load_sync_revisions
from invoicing_async._wire import xml
from invoicing_async.errors import DecodeError
from invoicing_async.models import SyncEntry
from invoicing_async.testing._writers import dump_sync_entries
from tests.unit.wire.xmltodict_reference import reference_members

REFUSED = "DecodeError"
MANY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Values and markup a hostile or odd body may hold where the usual one has digits.
ODD_TEXT = st.sampled_from(
    ["7", "007", "-3", " 5", "5 ", "+5", "1_0", "\u0665", "", "x", "9" * 19, "9" * 18, "1e3"]
)
ODD_MEMBER_PART = st.sampled_from(
    [
        "",
        "<state>open</state>",
        '<id type="integer">8</id>',
        "<id>9</id>",
        '<revision type="decimal">1.5</revision>',
        "<!-- c -->",
        "<![CDATA[1]]>",
        "text",
        "<x><y/></x>",
        "<?pi x?>",
    ]
)


@st.composite
def sync_bodies(draw: st.DrawFn) -> bytes:
    root = draw(st.sampled_from(["invoices", "contacts", "invoice"]))
    attrs = draw(st.sampled_from(['type="array"'] * 3 + ["", 'nil="true"', 'type="array" a="b"']))
    gap = draw(st.sampled_from(["", "\n  ", "\n\t "]))
    members = []
    for _ in range(draw(st.integers(0, 4))):
        ident = str(draw(st.integers(0, 10**12))) if draw(st.booleans()) else draw(ODD_TEXT)
        revision = str(draw(st.integers(0, 10**12)))
        name = draw(st.sampled_from(["invoice", "invoice", "item"]))
        member_attrs = draw(st.sampled_from([""] * 6 + [' nil="true"', ' type="integer"']))
        id_attrs = draw(st.sampled_from([' type="integer"'] * 8 + ["", ' type="string"']))
        fields = [
            f"<id{id_attrs}>{ident}</id>" if ident else f"<id{id_attrs}/>",
            f'<revision type="integer">{revision}</revision>',
        ]
        if draw(st.booleans()):
            fields.reverse()
        if draw(st.integers(0, 3)) == 0:
            fields.insert(draw(st.integers(0, 2)), draw(ODD_MEMBER_PART))
        inner = gap + gap.join(fields) + gap
        members.append(f"<{name}{member_attrs}>{inner}</{name}>")
    body = f"<{root} {attrs}>{gap}{gap.join(members)}{gap}</{root}>"
    prolog = draw(st.sampled_from(["", '<?xml version="1.0" encoding="UTF-8"?>\n']))
    return (prolog + body).encode()


def expected(body: bytes) -> Any:
    """The rules, read over the reference decoder: an `invoices` (or `invoice`) root, each
    member an element holding an `id` (an integer from 0) and a `revision` (an integer),
    typed or as ASCII digits, within 64 bits; the highest revision of an id listed twice.
    Anything else is refused (which words name it is the reader's own test's business)."""
    try:
        root, members = reference_members(body)
    except DecodeError:
        return REFUSED
    pairs: dict[int, int] = {}
    for member in members:
        if not isinstance(member, dict) or "id" not in member or "revision" not in member:
            return REFUSED
        ident, revision = _integer(member["id"]), _integer(member["revision"])
        if ident is None or revision is None or ident < 0:
            return REFUSED
        pairs[ident] = max(revision, pairs.get(ident, revision))
    if root.replace("-", "_") not in ("invoices", "invoice"):
        return REFUSED
    return sorted(pairs.items())


def _integer(value: Any) -> int | None:
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text[:1] in "+-" else text
        value = int(text) if digits.isascii() and digits.isdigit() and len(text) < 40 else None
    if type(value) is not int or not -(2**63) <= value < 2**63:
        return None
    return value


def matches(body: bytes) -> None:
    try:
        got: Any = sorted(load_sync_revisions(body, "xml").items())
    except DecodeError:
        got = REFUSED
    assert got == expected(body)


@MANY
@given(body=sync_bodies())
def test_every_shape_reads_as_the_rules_say(body: bytes) -> None:
    matches(body)


@MANY
@given(body=sync_bodies(), piece=st.integers(1, 300))
def test_any_slice_size_reads_alike(body: bytes, piece: int) -> None:
    """The reader is fed a slice at a time: where the slices end changes nothing."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(xml, "_SLICE", piece)
        matches(body)


GAP = st.sampled_from(["", " ", "\n  ", "\t", "\r\n", "\x0c", "\x0b"])
DIGITS = st.one_of(
    st.integers(0, 10**18).map(str), st.sampled_from(["007", "9" * 18, "9" * 19, "-1", ""])
)
PROLOG = st.sampled_from(
    ["", '<?xml version="1.0" encoding="UTF-8"?>', '<?xml version="1.0"?>\n', " <?xml?>", "\ufeff"]
)


@st.composite
def usual_bodies(draw: st.DrawFn) -> bytes:
    """Sync lists as Rails writes them, with the odd gap, digit or prolog between."""
    members = "".join(
        f'{draw(GAP)}<invoice>{draw(GAP)}<id type="integer">{draw(DIGITS)}</id>{draw(GAP)}'
        f'<revision type="integer">{draw(DIGITS)}</revision>{draw(GAP)}</invoice>'
        for _ in range(draw(st.integers(0, 5)))
    )
    body = f'{draw(PROLOG)}{draw(GAP)}<invoices type="array">{members}{draw(GAP)}</invoices>'
    return f"{body}{draw(GAP)}".encode()


@MANY
@given(body=usual_bodies())
def test_the_usual_shape_and_its_neighbours_read_as_the_rules_say(body: bytes) -> None:
    """The shape Rails writes is read in C; a neighbour (a form feed between tags, 19
    digits, a byte-order mark) by the reader, and the pairs or the refusal are the rules'."""
    matches(body)


def test_the_usual_shape_builds_no_element(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_reader(*args: object, **kwargs: object) -> None:
        raise AssertionError("the general reader ran")

    monkeypatch.setattr("invoicing_async._models.documents.decode_xml_members", no_reader)
    entries = [SyncEntry(id=i, revision=1_400_000_000 + i) for i in range(1, 2_001)]
    revisions = load_sync_revisions(dump_sync_entries(entries, "xml"), "xml")
    assert dict(revisions) == {e.id: e.revision for e in entries}


@pytest.mark.parametrize("pretty", [False, True])
def test_usual_lists(pretty: bool) -> None:
    entries = [SyncEntry(id=i, revision=1_400_000_000 + i) for i in (3, 1, 2, 2)]
    body = dump_sync_entries(entries, "xml")
    if pretty:
        body = body.replace(b"<invoice>", b"\n  <invoice>\n    ").replace(b"</id>", b"</id>\n    ")
        body = body.replace(b"</invoice>", b"\n  </invoice>").replace(
            b"</invoices>", b"\n</invoices>"
        )
    assert dict(load_sync_revisions(body, "xml")) == {
        1: 1_400_000_001,
        2: 1_400_000_002,
        3: 1_400_000_003,
    }


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (
            b'<invoices type="array"><invoice><id type="integer">99999999999999999999</id>'
            b'<revision type="integer">1</revision></invoice></invoices>',
            "64-bit range",
        ),
        (
            b'<invoices type="array"><invoice><id type="integer">1</id></invoice></invoices>',
            "without 'revision'",
        ),
        (b'<!DOCTYPE invoices><invoices type="array"/>', "document type declaration"),
        (b'<invoices type="array"><invoice><id type="integer">1</id>', "malformed XML"),
        (
            b'<invoices type="array"><invoice><id type="integer">-1</id>'
            b'<revision type="integer">1</revision></invoice></invoices>',
            "id is negative",
        ),
        (
            b'<invoices type="array"><invoice><id>x</id>'
            b'<revision type="integer">1</revision></invoice></invoices>',
            "sync list id: not an integer",
        ),
        (b'<contacts type="array"/>', "expected a 'invoices' list"),
    ],
)
def test_anything_else_is_refused_naming_what_is_wrong(body: bytes, why: str) -> None:
    with pytest.raises(DecodeError, match=why):
        load_sync_revisions(body, "xml")
