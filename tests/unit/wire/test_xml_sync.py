"""The sync list's fast path gives what the general reader gives, or leaves it to it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invoicing_async._models import documents
from invoicing_async._models.documents import load_sync_revisions
from invoicing_async._wire import xml_sync
from invoicing_async._wire.xml_sync import read_sync_pairs
from invoicing_async.errors import DecodeError
from invoicing_async.models import SyncEntry
from invoicing_async.testing._writers import dump_sync_entries

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


def general(body: bytes, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patch:
        patch.setattr(documents, "read_sync_pairs", lambda _body: None)
        return outcome(body)


def outcome(body: bytes) -> Any:
    try:
        return sorted(load_sync_revisions(body, "xml").items())
    except DecodeError as exc:
        return ("DecodeError", str(exc))


@MANY
@given(body=sync_bodies())
def test_fast_path_agrees_with_the_general_reader(body: bytes) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert outcome(body) == general(body, monkeypatch)


@MANY
@given(body=sync_bodies(), piece=st.integers(1, 300))
def test_any_slice_size_agrees(body: bytes, piece: int) -> None:
    """The fast path reads the body a slice at a time, each ending after a ">"."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        expected = general(body, monkeypatch)
        monkeypatch.setattr(xml_sync, "_SLICE", piece)
        assert outcome(body) == expected


@pytest.mark.parametrize("pretty", [False, True])
def test_usual_lists_take_the_fast_path(pretty: bool) -> None:
    entries = [SyncEntry(id=i, revision=1_400_000_000 + i) for i in (3, 1, 2, 2)]
    body = dump_sync_entries(entries, "xml")
    if pretty:
        body = body.replace(b"<invoice>", b"\n  <invoice>\n    ").replace(b"</id>", b"</id>\n    ")
        body = body.replace(b"</invoice>", b"\n  </invoice>").replace(
            b"</invoices>", b"\n</invoices>"
        )
    fast = read_sync_pairs(body)
    assert fast is not None
    root, ids, revisions = fast
    assert (root, list(ids), list(revisions)) == (
        "invoices",
        [3, 1, 2, 2],
        [1_400_000_003, 1_400_000_001, 1_400_000_002, 1_400_000_002],
    )
    assert dict(load_sync_revisions(body, "xml")) == {
        1: 1_400_000_001,
        2: 1_400_000_002,
        3: 1_400_000_003,
    }


@pytest.mark.parametrize(
    "body",
    [
        b'<invoices type="array"><invoice><id type="integer">99999999999999999999</id>'
        b'<revision type="integer">1</revision></invoice></invoices>',
        b'<invoices type="array"><invoice><id type="integer">1</id></invoice></invoices>',
        b'<!DOCTYPE invoices><invoices type="array"/>',
        b'<invoices type="array"><invoice><id type="integer">1</id>',
    ],
)
def test_anything_else_is_left_to_the_general_reader(body: bytes) -> None:
    assert read_sync_pairs(body) is None
    with pytest.raises(DecodeError):
        load_sync_revisions(body, "xml")
