"""The queries of docs/guide/sql-mirror.md, run as written against a PostgreSQL and a SQLite
store filled by syncs from the fake service, their answers checked against the service.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import sqlite3
import textwrap
from collections import defaultdict
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import psycopg
import pytest

from invoicing_async import models as m
from invoicing_async.sync import PostgresStore, SQLiteStore, SyncEngine
from invoicing_async.testing import FakeInvoicingService, populate

DOC = Path(__file__).parents[3] / "docs" / "guide" / "sql-mirror.md"
UNPAID = ("open", "late")


def doc_queries() -> dict[str, dict[str, str]]:
    """Section title -> {"PostgreSQL": sql, "SQLite": sql}, from the page's tabs."""
    text = DOC.read_text()
    found: dict[str, dict[str, str]] = {}
    for title, body in re.findall(r"^### (.+?)\n(.*?)(?=^##|\Z)", text, re.M | re.S):
        tabs = re.findall(r'=== "(\w+)"\n\n    ```sql\n(.*?)\n    ```', body, re.S)
        if tabs:
            found[title] = {name: textwrap.dedent(sql) for name, sql in tabs}
    return found


QUERIES = doc_queries()


def for_psycopg(sql: str) -> str:
    """psql's :'name' and :name parameters as psycopg's %(name)s."""
    return re.sub(r"(?<![:\w]):'?(\w+)'?", r"%(\1)s", sql)


@attrs.frozen
class Mirror:
    """Both stores after two syncs of one account, and what the service holds."""

    postgres_url: str
    sqlite_path: Path
    invoices: dict[int, m.Invoice]
    since: dt.datetime
    changed: set[int]
    rechecked: set[int]
    deleted: set[int]

    def postgres(self, title: str, **params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.postgres_url) as conn:
            sql = for_psycopg(QUERIES[title]["PostgreSQL"])
            return conn.execute(sql, {"account": "acme", **params}).fetchall()

    def sqlite(self, title: str, **params: Any) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(self.sqlite_path)) as db:
            return db.execute(QUERIES[title]["SQLite"], params).fetchall()

    def unpaid(self) -> list[m.Invoice]:
        return [i for i in self.invoices.values() if i.state in UNPAID]


@pytest.fixture
async def mirror(postgres_url: str, tmp_path: Path) -> AsyncIterator[Mirror]:
    async with FakeInvoicingService(invoices=0, limit=100_000) as service:
        populate(service.account, 300, seed=11)
        async with (
            service.client(format="json") as client,
            PostgresStore(postgres_url, account="acme") as postgres,
            SQLiteStore(tmp_path / "mirror.db") as sqlite,
        ):
            for store in (postgres, sqlite):
                assert (await SyncEngine(client, store).run()).complete
            rechecked = set(await postgres.pending()) | set(await sqlite.pending())
            since = dt.datetime.now(dt.timezone.utc)
            ids = sorted(service.account.invoices)
            deleted, changed = set(ids[:7]), set(ids[7:27])
            for ident in deleted:
                service.account.delete_invoice(ident)
            for ident in changed:
                service.account.mutate(ident)
            for store in (postgres, sqlite):
                report = await SyncEngine(client, store).run()
                assert (report.deleted, report.updated) == (7, 20)
        yield Mirror(
            postgres_url,
            tmp_path / "mirror.db",
            dict(service.account.invoices),
            since,
            changed,
            rechecked,
            deleted,
        )


def test_the_page_has_five_queries_for_each_store() -> None:
    assert len(QUERIES) == 5
    assert all(set(q) == {"PostgreSQL", "SQLite"} for q in QUERIES.values())


async def test_late_invoices(mirror: Mirror) -> None:
    late = sorted(
        (i.invoice_date + dt.timedelta(days=i.due_date_interval or 0), i.id, i)
        for i in mirror.invoices.values()
        if i.state == "late" and i.invoice_date is not None
    )
    assert late
    expected = [(i.id, i.invoice_id, due, i.total_unpaid) for due, _, i in late]
    assert mirror.postgres("Late invoices") == expected
    assert mirror.sqlite("Late invoices") == [
        (ident, number, due.isoformat(), str(unpaid)) for ident, number, due, unpaid in expected
    ]


async def test_unpaid_total_per_contact(mirror: Mirror) -> None:
    totals: dict[int, Decimal] = defaultdict(Decimal)
    counts: dict[int, int] = defaultdict(int)
    for invoice in mirror.unpaid():
        assert invoice.contact_id is not None
        totals[invoice.contact_id] += invoice.total_unpaid or 0
        counts[invoice.contact_id] += 1
    rows = mirror.postgres("Unpaid total per contact")
    assert {r[0]: (r[2], r[3]) for r in rows} == {c: (counts[c], totals[c]) for c in totals}
    assert [r[3] for r in rows] == sorted((r[3] for r in rows), reverse=True)
    assert sum(r[3] for r in rows) == sum(totals.values())  # exact to the cent
    lite = mirror.sqlite("Unpaid total per contact")
    assert [(r[0], r[2], r[3]) for r in lite] == [(r[0], r[2], round(float(r[3]), 2)) for r in rows]


async def test_open_invoices_of_a_contact(mirror: Mirror) -> None:
    by_contact: dict[int, list[int]] = defaultdict(list)
    for invoice in mirror.unpaid():
        assert invoice.contact_id is not None
        assert invoice.id is not None
        by_contact[invoice.contact_id].append(invoice.id)
    contact = max(by_contact, key=lambda c: len(by_contact[c]))
    expected = sorted(by_contact[contact])
    assert len(expected) > 1
    assert [r[0] for r in mirror.postgres("Open invoices of a contact", contact=contact)] == (
        expected
    )
    assert [r[0] for r in mirror.sqlite("Open invoices of a contact", contact=contact)] == (
        expected
    )


async def test_the_open_invoices_of_a_contact_come_from_the_index(mirror: Mirror) -> None:
    with psycopg.connect(mirror.postgres_url, autocommit=True) as conn:
        with conn.cursor().copy(
            "COPY invoicing_invoices (account, id, revision, state, contact_id, document,"
            " raw, synced_at) FROM STDIN"
        ) as copy:
            for n in range(50_000):
                state = ("draft", "open", "late", "paid")[n % 4]
                copy.write_row(
                    ("acme", 10_000_000 + n, 1, state, n % 2000, "{}", b"{}", mirror.since)
                )
        conn.execute("ANALYZE invoicing_invoices")
        sql = for_psycopg(QUERIES["Open invoices of a contact"]["PostgreSQL"])
        plan = conn.execute(f"EXPLAIN {sql}", {"account": "acme", "contact": 7}).fetchall()
    assert "invoicing_invoices_contact_state" in " ".join(str(r[0]) for r in plan)


async def test_invoices_changed_since_a_time(mirror: Mirror) -> None:
    for rows in (
        mirror.postgres("Invoices changed since a time", since=mirror.since),
        mirror.sqlite("Invoices changed since a time", since=mirror.since.isoformat()),
    ):
        found = {r[0] for r in rows}
        # The changed ones, and perhaps some read again because their revision's second
        # was not over when the first sync read them.
        assert mirror.changed <= found <= mirror.changed | mirror.rechecked
        assert all(mirror.invoices[r[0]].revision == r[1] for r in rows)


async def test_invoices_deleted_since_a_time(mirror: Mirror) -> None:
    assert {r[0] for r in mirror.postgres("Invoices deleted since a time", since=mirror.since)} == (
        mirror.deleted
    )
    lite = mirror.sqlite("Invoices deleted since a time", since=mirror.since.isoformat())
    assert {r[0] for r in lite} == mirror.deleted
    assert mirror.sqlite("Invoices deleted since a time", since="9999") == []
