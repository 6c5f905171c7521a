"""The poison batch: one member of a sync-fetch reply that cannot be read is set aside
on its own, in both formats and whatever is wrong with it; the others of its batch are
stored in the same run, and no request is spent again on it."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import attrs
import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async.sync import (
    InvoiceDocument,
    MemoryStore,
    PostgresStore,
    SQLiteStore,
    Store,
    SyncEngine,
    SyncReport,
)
from invoicing_async.testing import (
    FakeInvoicingService,
    MockSender,
    OutgoingRequest,
    RawResponse,
    mock_response,
)
from invoicing_async.testing._app import parse_sync_ids
from invoicing_async.testing._writers import dump_list, dump_sync_entries

BAD = 137  # the id of the member that is poisoned
MARK_TIME = dt.datetime(2001, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc)
MARK_MONEY = Decimal("123456.789")
MARK_CONTACT = 987654321
HUGE = 2**63  # no id the service can have


def _replace_in_member(body: bytes, old: bytes, new: bytes) -> bytes:
    assert body.count(old) == 1
    return body.replace(old, new)


def _wrap_under_other_key(body: bytes) -> bytes:
    at = body.index(b'"123456.789"')
    start = body.rindex(b'{"invoice":', 0, at)
    return body[:start] + b'{"payload":' + body[start + len(b'{"invoice":') :]


def _huge_id(fmt: str) -> Callable[[bytes], bytes]:
    """BAD's id made 2**63: the member's id cannot be read (nor stored)."""
    if fmt == "json":
        return lambda b: _replace_in_member(
            b, b'{"invoice":{"id":%d,' % BAD, b'{"invoice":{"id":%d,' % HUGE
        )
    old = b'<invoice><id type="integer">%d</id>' % BAD
    return lambda b: _replace_in_member(b, old, b'<invoice><id type="integer">%d</id>' % HUGE)


def _surrogate_key(body: bytes) -> bytes:
    """An unknown top-level key holding a lone surrogate in BAD's member (JSON): no
    PostgreSQL text or jsonb can hold it."""
    old = b'{"invoice":{"id":%d,' % BAD
    return _replace_in_member(body, old, old + b'"x\\udfff":1,')


def _nested(depth: int) -> bytes:
    return b"<a>" * depth + b"</a>" * depth


def _deep_xml(after: bytes, inside: bytes = b"") -> Callable[[bytes], bytes]:
    """BAD's member nested 150 deep (past `MAX_DEPTH`, 100) right after `after` in it:
    under an element of its own `inside` (an unknown field) or where `after` ends."""
    depth = _nested(150)
    deep = b"<%s>%s</%s>" % (inside, depth, inside) if inside else depth

    def spoil(body: bytes) -> bytes:
        start = body.index(b'<invoice><id type="integer">%d</id>' % BAD)
        at = body.index(after, start) + len(after)
        return body[:at] + deep + body[at:]

    return spoil


# (format, how the reply is spoiled)
POISONS: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "xml datetime": (
        "xml",
        lambda b: _replace_in_member(b, b"2001-02-03T04:05:06+00:00", b"yesterday"),
    ),
    "xml decimal": ("xml", lambda b: _replace_in_member(b, b"123456.789", b"12,5")),
    "xml integer": ("xml", lambda b: _replace_in_member(b, b"987654321", b"x1")),
    "xml id past 64 bits": ("xml", _huge_id("xml")),
    "xml nested too deep, unknown field": ("xml", _deep_xml(b"</id>", inside=b"x")),
    "xml nested too deep, unknown field before the id": (
        "xml",
        _deep_xml(b"<invoice>", inside=b"x"),
    ),
    "xml nested too deep, in a line": ("xml", _deep_xml(b"<detail>")),
    "xml nested too deep, in the id": ("xml", _deep_xml(b'<id type="integer">')),
    "json 1e999": ("json", lambda b: _replace_in_member(b, b'"123456.789"', b"1e999")),
    "json under another key": ("json", _wrap_under_other_key),
    "json id past 64 bits": ("json", _huge_id("json")),
    "json lone surrogate in an unknown key": ("json", _surrogate_key),
}


class Account:
    """250 invoices served through `MockSender`, every sync-fetch reply spoiled."""

    def __init__(self, fmt: str, spoil: Callable[[bytes], bytes]) -> None:
        service = FakeInvoicingService(invoices=250, seed=7)
        self.invoices = dict(service.account.invoices)
        self.invoices[BAD] = attrs.evolve(
            self.invoices[BAD],
            created_at=MARK_TIME,
            total_price_incl_tax=MARK_MONEY,
            contact_id=MARK_CONTACT,
        )
        self.fmt = fmt
        self.spoil = spoil
        self.paths: list[str] = []

    def handle(self, request: OutgoingRequest) -> RawResponse:
        path = request.url.path
        self.paths.append(path)
        fmt = self.fmt
        if path.endswith("sync_list_ids.xml"):
            entries = [
                m.SyncEntry(id=i, revision=inv.revision or 0) for i, inv in self.invoices.items()
            ]
            return mock_response(200, dump_sync_entries(entries, fmt))  # type: ignore[arg-type]
        ids = parse_sync_ids(request.body or b"", fmt)  # type: ignore[arg-type]
        chosen = [self.invoices[i] for i in ids if i in self.invoices]
        body = dump_list(chosen, fmt, m.Invoice)  # type: ignore[arg-type]
        return mock_response(200, self.spoil(body) if BAD in ids else body)


async def _sync_poisoned(poison: str) -> tuple[SyncReport, MemoryStore]:
    fmt, spoil = POISONS[poison]
    account = Account(fmt, spoil)
    store = MemoryStore()
    async with ia.InvoicingClient(
        "https://acme.example.com",
        auth=ia.BasicAuth("u", "p"),
        format=fmt,  # type: ignore[arg-type]
        sender=MockSender(account.handle),
    ) as client:
        report = await SyncEngine(client, store).run()
    return report, store


@pytest.mark.parametrize("poison", sorted(POISONS))
async def test_one_bad_member_costs_only_itself(poison: str) -> None:
    report, store = await _sync_poisoned(poison)
    stored = await store.revisions()
    assert report.requests == 1 + 3  # the list and three batches: nothing tried again
    assert report.errors == []
    assert len(stored) == 249
    assert BAD not in stored
    assert report.quarantined == [BAD]  # named by its id, or the one id its batch lacks
    assert BAD in report.unreadable


@pytest.mark.parametrize(
    ("poison", "field"),
    [
        ("xml nested too deep, unknown field", "x"),
        ("xml nested too deep, unknown field before the id", "x"),
        ("xml nested too deep, in a line", "details"),
        ("xml nested too deep, in the id", "id"),
    ],
)
async def test_a_member_nested_too_deep_is_quarantined_with_its_field(
    poison: str, field: str
) -> None:
    """The XML reader skips the field holding the deep part (never building it) and
    reads the member on: its id is found even after the deep part."""
    report, _ = await _sync_poisoned(poison)
    assert report.unreadable[BAD] == f"Invoice.{field}: nested more than 100 levels deep"


def _deep_unknown_field(body: bytes) -> bytes:
    """An unknown field nested 340 arrays deep in BAD's member (JSON)."""
    old = b'{"invoice":{"id":%d,' % BAD
    deep = b'"x":' + b"[" * 340 + b"]" * 340 + b","
    return _replace_in_member(body, old, old + deep)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_whatever_the_fast_path_stores_the_converter_reads(kind: str, tmp_path: Path) -> None:
    """A member nested deeper than `MAX_DEPTH` is judged by the converter, which refuses
    it: it is quarantined, never stored to break every later read."""
    account = Account("json", _deep_unknown_field)
    store: Store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.db")
    async with ia.InvoicingClient(
        "https://acme.example.com",
        auth=ia.BasicAuth("u", "p"),
        format="json",
        sender=MockSender(account.handle),
    ) as client:
        report = await SyncEngine(client, store).run()
    assert report.quarantined == [BAD]
    assert "nested more than 100 levels" in report.unreadable[BAD]
    assert len([invoice async for invoice in store.iter_invoices()]) == 249
    assert await store.get(BAD) is None
    await store.close()


async def test_a_lone_surrogate_in_an_unknown_key_costs_postgres_only_its_invoice(
    postgres_url: str,
) -> None:
    """PostgreSQL refuses a lone surrogate anywhere in a document: the member is
    quarantined before the upsert, and the 249 others are stored (0 of 100 were)."""
    account = Account("json", _surrogate_key)
    async with (
        PostgresStore(postgres_url, account="acme") as store,
        ia.InvoicingClient(
            "https://acme.example.com",
            auth=ia.BasicAuth("u", "p"),
            format="json",
            sender=MockSender(account.handle),
        ) as client,
    ):
        report = await SyncEngine(client, store).run()
        assert report.errors == []
        assert report.quarantined == [BAD]
        revisions = await store.revisions()
        assert len(revisions) == 249
        assert BAD not in revisions


async def test_one_unreadable_row_fails_only_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A row that cannot be read (a hand-edited file) is skipped with a warning when
    iterating or querying; `get` of it raises `DecodeError` naming it."""
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await store.apply_documents(
            [InvoiceDocument.of(m.Invoice(id=i, revision=1, state="open")) for i in (1, 2, 3)]
        )
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE invoices SET document = ? WHERE id = 2", (b'{"invoice":[[[',))
    raw.close()
    async with SQLiteStore(path) as store:
        assert [i.id async for i in store.iter_invoices()] == [1, 3]
        assert [i.id for i in await store.by_state("open")] == [1, 3]
        assert "stored invoice 2 cannot be read" in caplog.text
        with pytest.raises(ia.DecodeError, match="stored invoice 2 cannot be read"):
            await store.get(2)
        assert await store.get(3) is not None


def _with_stranger(body: bytes) -> bytes:
    """One more member than asked for: an id nobody asked for and nobody can read."""
    stranger = b'<invoice><id type="integer">99999999999999999999</id></invoice>'
    return body.replace(b"</invoices>", stranger + b"</invoices>")


async def test_a_member_nobody_asked_for_costs_nothing() -> None:
    """A batch of 100 answered with one more, unasked member whose id is past 64 bits:
    the stranger is ignored and the 100 asked-for invoices are stored (the whole batch
    was lost: more members than asked was refused as a memory bomb)."""
    account = Account("xml", _with_stranger)
    store = MemoryStore()
    async with ia.InvoicingClient(
        "https://acme.example.com",
        auth=ia.BasicAuth("u", "p"),
        format="xml",
        sender=MockSender(account.handle),
    ) as client:
        report = await SyncEngine(client, store).run()
    assert report.errors == []
    assert report.quarantined == []
    assert len(await store.revisions()) == 250
