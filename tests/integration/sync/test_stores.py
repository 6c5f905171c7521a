"""The `Store` contract (`invoicing_async.testing.StoreSuite`), run against every store the
package ships, as a store's author runs it against theirs; then what is SQLite's own."""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from invoicing_async import models as m
from invoicing_async.sync import MemoryStore, PostgresStore, SQLiteStore, Store
from invoicing_async.testing import StoreSuite
from tests.integration.sync.documents import documents_of

AT = dt.datetime(2014, 7, 30, 12, 0, tzinfo=dt.timezone.utc)


def inv(ident: int, revision: int, po: str = "") -> m.Invoice:
    return m.Invoice(id=ident, revision=revision, po_number=po or f"r{revision}", state="open")


class TestMemoryStore(StoreSuite):
    async def make_store(self) -> Store:
        return MemoryStore()


class TestSQLiteStore(StoreSuite):
    async def make_store(self) -> Store:
        return SQLiteStore(self.tmp_path / f"{self.fresh_name()}.db")

    async def reopen_store(self, store: Store) -> Store | None:
        assert isinstance(store, SQLiteStore)
        return SQLiteStore(store.path)


class TestPostgresStore(StoreSuite):
    """A fresh database of the suite's own server (tests/servers.py) per test; an account
    of it per store."""

    url: str

    @pytest.fixture(autouse=True)
    def _database(self, postgres_url: str) -> None:
        self.url = postgres_url

    async def make_store(self) -> Store:
        return PostgresStore(self.url, account=self.fresh_name())

    async def reopen_store(self, store: Store) -> Store | None:
        assert isinstance(store, PostgresStore)
        return PostgresStore(self.url, account=store.account)


async def test_sqlite_iteration_pages_through_bounded_reads(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "p.db") as store:
        await store.apply_documents(documents_of([inv(i, 1) for i in range(1, 1001)]))
        await store.apply_deletions(range(1, 1001, 2), AT)
        seen = [invoice.id async for invoice in store.iter_invoices(page=7)]
    assert seen == list(range(2, 1001, 2))


async def test_sql_stores_keep_the_documents_without_building_models(tmp_path: Path) -> None:
    """What the engine hands a store from a JSON reply is written as the bytes sent; no
    model is built on the way (the suite checks the bytes; this, the cost)."""
    from invoicing_async._models.stored import load_invoice_documents
    from invoicing_async.testing import FakeInvoicingService
    from invoicing_async.testing._writers import dump_list

    invoices = list(FakeInvoicingService(invoices=20, seed=5).account.invoices.values())
    docs, failed = load_invoice_documents(dump_list(invoices, "json", m.Invoice), "json", limit=100)
    assert failed == []
    async with SQLiteStore(tmp_path / "s.db") as store:
        assert len((await store.apply_documents(docs)).created) == 20
    assert all(doc._model is None for doc in docs)  # noqa: SLF001 - never built


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
