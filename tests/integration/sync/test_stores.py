"""The `Store` contract, checked against every store the package ships."""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from invoicing_async import models as m
from invoicing_async.sync import MemoryStore, PendingEntry, PostgresStore, SQLiteStore, Store
from tests.integration.sync.documents import documents_of
from tests.servers import POSTGRES

AT = dt.datetime(2014, 7, 30, 12, 0, tzinfo=dt.timezone.utc)


def inv(ident: int, revision: int, po: str = "") -> m.Invoice:
    return m.Invoice(id=ident, revision=revision, po_number=po or f"r{revision}", state="open")


@pytest.fixture(params=["memory", "sqlite", POSTGRES])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made: Store
    if request.param == "memory":
        made = MemoryStore()
    elif request.param == "sqlite":
        made = SQLiteStore(tmp_path / "s.db")
    else:  # a fresh database of the suite's own server (tests/servers.py)
        made = PostgresStore(request.getfixturevalue("postgres_url"), account="acme")
    yield made
    await made.close()


async def test_new_updated_and_stale_are_told_apart(store: Store) -> None:
    first = await store.apply_documents(documents_of([inv(1, 10), inv(2, 10)]))
    assert (first.created, first.updated, first.stale) == ([1, 2], [], [])
    second = await store.apply_documents(
        documents_of([inv(1, 11, "newer"), inv(2, 9, "older"), inv(3, 1)])
    )
    assert (second.created, second.updated, second.stale) == ([3], [1], [2])
    assert await store.revisions() == {1: 11, 2: 10, 3: 1}
    two = await store.get(2)
    assert two is not None
    assert two.po_number == "r10"  # the older revision did not overwrite it
    same = await store.apply_documents(documents_of([inv(1, 11, "same second, later")]))
    assert same.updated == [1]  # revisions are seconds: the later fetch of one second wins
    one = await store.get(1)
    assert one is not None
    assert one.po_number == "same second, later"


async def test_tombstones_and_revival(store: Store) -> None:
    await store.apply_documents(documents_of([inv(1, 1), inv(2, 1), inv(3, 1)]))
    assert await store.apply_deletions([1, 2, 99], AT) == 2
    assert await store.apply_deletions([1], AT) == 0  # already a tombstone
    assert await store.get(1) is None
    assert await store.revisions() == {3: 1}
    revived = await store.apply_documents(
        documents_of([inv(1, 1)])
    )  # listed again, even at the same revision
    assert revived.created == [1]
    assert await store.get(1) is not None


async def test_pending_plan_round_trips(store: Store) -> None:
    entries = {
        4: PendingEntry(id=4, revision=7),
        5: PendingEntry(id=5, revision=8, attempts=3, quarantined=True, since=1234.5),
    }
    await store.save_pending(entries)
    assert await store.pending() == entries
    await store.apply_documents(documents_of([inv(4, 7)]))
    assert set(await store.pending()) <= {4, 5}
    await store.save_pending({})
    assert await store.pending() == {}


async def test_iterates_every_live_invoice_in_id_order(store: Store) -> None:
    await store.apply_documents(documents_of([inv(i, 1) for i in (5, 3, 9, 1, 7)]))
    await store.apply_deletions([3], AT)
    seen = [invoice.id async for invoice in store.iter_invoices()]
    assert seen == [1, 5, 7, 9]


async def test_sqlite_iteration_pages_through_bounded_reads(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "p.db") as store:
        await store.apply_documents(documents_of([inv(i, 1) for i in range(1, 1001)]))
        await store.apply_deletions(range(1, 1001, 2), AT)
        seen = [invoice.id async for invoice in store.iter_invoices(page=7)]
    assert seen == list(range(2, 1001, 2))


@pytest.mark.parametrize("fmt", ["xml", "json"])
async def test_documents_as_decoded_are_stored_and_read_back_as_the_models(
    store: Store, fmt: str
) -> None:
    """The engine hands stores each invoice as decoded; no store encodes it again, and
    what is read back equals the model decoded from the service."""
    from invoicing_async._models.stored import load_invoice_documents
    from invoicing_async.testing import FakeInvoicingService
    from invoicing_async.testing._writers import dump_list

    service = FakeInvoicingService(invoices=30, seed=4)
    invoices = list(service.account.invoices.values())
    body = dump_list(invoices, fmt, m.Invoice)  # type: ignore[arg-type]
    documents, failed = load_invoice_documents(body, fmt, limit=100)  # type: ignore[arg-type]
    assert failed == []
    result = await store.apply_documents(documents)
    assert len(result.created) == 30
    for invoice in invoices:
        assert invoice.id is not None
        assert await store.get(invoice.id) == invoice


@pytest.fixture(params=["sqlite", POSTGRES])
async def document_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The stores that keep documents (`MemoryStore` keeps models: it is given those)."""
    made: Store
    if request.param == "sqlite":
        made = SQLiteStore(tmp_path / "s.db")
    else:
        made = PostgresStore(request.getfixturevalue("postgres_url"), account="acme")
    yield made
    await made.close()


async def test_documents_are_stored_as_given_and_read_back_as_the_models(
    document_store: Store,
) -> None:
    """`apply_documents`: what the engine hands a store from a JSON reply, written as the
    bytes sent without building a model; read back as the model the converter makes of
    them, with the revision rule of `write_outcome`."""
    import attrs

    from invoicing_async._models.stored import InvoiceDocument, load_invoice_documents
    from invoicing_async.testing import FakeInvoicingService
    from invoicing_async.testing._writers import dump_list

    service = FakeInvoicingService(invoices=20, seed=5)
    invoices = list(service.account.invoices.values())
    body = dump_list(invoices, "json", m.Invoice)
    docs, failed = load_invoice_documents(body, "json", limit=100)
    assert failed == []
    store = document_store
    assert len((await store.apply_documents(docs)).created) == 20
    assert all(doc._model is None for doc in docs)  # noqa: SLF001 - never built
    for invoice in invoices:
        assert invoice.id is not None
        assert await store.get(invoice.id) == invoice
    first, second = invoices[0], invoices[1]
    assert first.revision is not None
    assert second.revision is not None
    older = InvoiceDocument.of(attrs.evolve(first, revision=first.revision - 1, po_number="old"))
    later = InvoiceDocument.of(attrs.evolve(second, po_number="same second, later"))
    result = await store.apply_documents([older, later])
    assert (result.created, result.updated, result.stale) == ([], [second.id], [first.id])
    assert await store.get(first.id) == first  # type: ignore[arg-type]
    kept = await store.get(second.id)  # type: ignore[arg-type]
    assert kept is not None
    assert kept.po_number == "same second, later"


async def test_every_store_applies_the_one_revision_rule(store: Store) -> None:
    """`write_outcome` is the rule; each store (PostgreSQL's in SQL) gives its outcomes."""
    from invoicing_async._sync.store import write_outcome

    cases = [(None, False, 5), (10, False, 9), (10, False, 10), (10, False, 11), (10, True, 3)]
    ids = range(1, len(cases) + 1)
    await store.apply_documents(
        documents_of(
            inv(i, before)
            for i, (before, _, _) in zip(ids, cases, strict=True)
            if before is not None
        )
    )
    await store.apply_deletions(
        [i for i, (_, deleted, _) in zip(ids, cases, strict=True) if deleted], AT
    )
    result = await store.apply_documents(
        documents_of(
            inv(i, fetched, "fetched") for i, (_, _, fetched) in zip(ids, cases, strict=True)
        )
    )
    outcomes = {i: kind for kind in ("created", "updated", "stale") for i in getattr(result, kind)}
    assert outcomes == {
        i: write_outcome(fetched, before, deleted=deleted)
        for i, (before, deleted, fetched) in zip(ids, cases, strict=True)
    }
    assert outcomes == {1: "created", 2: "stale", 3: "updated", 4: "updated", 5: "created"}


async def test_a_new_sqlite_file_has_16k_pages_and_an_older_one_keeps_its_own(
    tmp_path: Path,
) -> None:
    """Documents of a few KB fit a 16 KiB page whole (a batch commits a quarter of the
    pages); a file made with other pages keeps them, as SQLite cannot change them in WAL."""
    older = tmp_path / "older.db"
    with contextlib.closing(sqlite3.connect(older)) as raw:
        raw.execute("PRAGMA page_size=4096")
        raw.execute("VACUUM")  # an empty database, written with 4 KiB pages
    for path, pages in ((tmp_path / "new.db", 16384), (older, 4096)):
        async with SQLiteStore(path) as store:
            await store.apply_documents(documents_of([inv(1, 1), inv(2, 1)]))
            assert await store.revisions() == {1: 1, 2: 1}
        with contextlib.closing(sqlite3.connect(path)) as raw:
            assert raw.execute("PRAGMA page_size").fetchone() == (pages,)
