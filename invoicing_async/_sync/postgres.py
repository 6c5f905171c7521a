"""`PostgresStore`: many accounts' invoices in one PostgreSQL database, keyed by
(account, id); a batch is one upsert statement. Needs the ``[postgres]`` extra."""

from __future__ import annotations

import asyncio
import datetime as dt
from array import array
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._postgres import migrations
from invoicing_async._postgres.connect import BoundedCalls, connection_pool, require_psycopg
from invoicing_async._postgres.reasons import where_of
from invoicing_async._sync.store import BatchResult, DocumentQueries, PendingEntry, newest
from invoicing_async.errors import ConfigurationError
from invoicing_async.models import Invoice, SyncRevisions

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow
    from psycopg_pool import AsyncConnectionPool

    Pool = AsyncConnectionPool[AsyncConnection[TupleRow]]
    Conn = AsyncConnection[TupleRow]

__all__ = ["SCHEMA", "PostgresStore"]

#: The store's tables: migrations in ``_sync/sql/``.
SCHEMA = migrations.Component("store", "invoicing_async._sync", sign="invoicing_invoices")

T = TypeVar("T")

# The plan replaced in one statement: rows no longer in it deleted, the others upserted.
# Its arrays go in binary (%b), as UPSERT_BATCH's: the text format quotes each element.
_SAVE_PENDING = (
    "WITH gone AS (DELETE FROM invoicing_pending WHERE account = %s"
    " AND NOT id = ANY(%b::bigint[]))"
    " INSERT INTO invoicing_pending (account, id, revision, attempts, quarantined, since)"
    " SELECT %s, * FROM unnest(%b::bigint[], %b::bigint[], %b::integer[], %b::boolean[],"
    " %b::double precision[]) ON CONFLICT (account, id) DO UPDATE SET"
    " revision = EXCLUDED.revision, attempts = EXCLUDED.attempts,"
    " quarantined = EXCLUDED.quarantined, since = EXCLUDED.since"
)
#: Rows of `PostgresStore.revisions` per SELECT (keyset pages by id).
REVISIONS_PAGE = 5000
# The first page of revisions and the pending plan (its rows have attempts), in one.
_REVISIONS_AND_PENDING = (
    "SELECT * FROM (SELECT id, revision, NULL::integer, NULL::boolean, NULL::double precision"
    " FROM invoicing_invoices WHERE account = %s AND deleted_at IS NULL ORDER BY id LIMIT %s) r"
    " UNION ALL SELECT id, revision, attempts, quarantined, since FROM invoicing_pending"
    " WHERE account = %s"
)
_REVISIONS_AFTER = (
    "SELECT id, revision FROM invoicing_invoices WHERE account = %s AND deleted_at IS NULL"
    " AND id > %s ORDER BY id LIMIT %s"
)


class PostgresStore(DocumentQueries):
    """An account's invoices in PostgreSQL, beside other accounts' in the same tables.

    ``PostgresStore("postgresql://…", account="acme")`` makes and owns a pool;
    ``PostgresStore(pool, account="acme")`` uses a shared one (see `PostgresStore.connection_pool`)
    and leaves it open on `close()`. The schema is migrated on first use unless
    ``migrate=False``.

    Documents are stored as ``jsonb`` (for SQL queries) and as the exact bytes the service
    sent (``raw``, what is read back: jsonb rewrites numbers and cannot hold a NUL).

    Timeouts (seconds): `timeout` bounds every call on the client side; `statement_timeout`
    (default 0.8 x `timeout`) lets the server cancel a slow statement first; `connect_timeout`
    and `pool_timeout` bound connecting and waiting for a connection (for a pool it makes)."""

    _MARK = "%s"

    def __init__(
        self,
        url_or_pool: str | Pool,
        *,
        account: str,
        migrate: bool = True,
        timeout: float = 30.0,
        statement_timeout: float | None = None,
        connect_timeout: float = 5.0,
        pool_timeout: float = 10.0,
        max_connections: int = 4,
    ) -> None:
        require_psycopg()
        if not isinstance(account, str) or not account:
            raise ConfigurationError("PostgresStore needs an account name (a non-empty string)")
        self.account = account
        self.timeout = timeout
        self._migrate = migrate
        if isinstance(url_or_pool, str):
            statement = 0.8 * timeout if statement_timeout is None else statement_timeout
            self._pool: Pool = connection_pool(
                url_or_pool,
                max_size=max_connections,
                connect_timeout=connect_timeout,
                statement_timeout=statement,
                pool_timeout=pool_timeout,
            )
            self._owns_pool = True
        else:
            self._pool = url_or_pool
            self._owns_pool = False
        self._where = where_of(str(self._pool.conninfo))
        self._pool_timeout = pool_timeout
        self._ready = False
        # Whether the account has a pending plan stored (None: not known yet).
        self._pending_stored: bool | None = None
        # The plan `revisions()` read beside the revisions, for the next `pending()`.
        self._pending_read: dict[int, PendingEntry] | None = None
        self._opening = asyncio.Lock()
        self._calls = BoundedCalls(timeout, self._where)

    @staticmethod
    async def migrate(url: str, *, timeout: float = 60.0) -> list[int]:
        """Bring the schema of the database at `url` up to date; the versions applied.

        A deployment step (``invoicing-async db migrate``) for a role that may create tables;
        safe from several processes at once; a newer database is refused (`StoreError`)."""
        applied = await migrations.migrate(url, [SCHEMA], timeout=timeout)
        return [m.version for m in applied]

    #: A pool (not opened yet) for many stores to share: `_postgres.connect.connection_pool`.
    connection_pool = staticmethod(connection_pool)

    def __repr__(self) -> str:
        return f"PostgresStore({self._where}, account={self.account!r})"

    async def __aenter__(self) -> PostgresStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Open the pool (when it is ours) and check or migrate the schema; done once."""
        async with self._opening:
            if self._ready:
                return
            await self._calls.run(self._open, "cannot open")
            self._ready = True

    async def _open(self) -> None:
        if self._owns_pool:
            # Our pool connects once first (`connect.Pool`): a wrong URL, a missing
            # database or a refused login fails now with the server's reason.
            await self._pool.open(wait=False)
        async with migrations.once_per_pool(self._pool, [SCHEMA]) as needed:
            if needed:  # checked once per pool, not at every open of its stores
                async with self._pool.connection(timeout=self._pool_timeout) as conn:
                    if self._migrate:
                        await migrations.apply(conn, [SCHEMA], self._where)
                    else:
                        await migrations.check(conn, [SCHEMA], self._where)

    async def _call(self, work: Callable[[Conn], Awaitable[T]], doing: str = "cannot use") -> T:
        """`work` on a pooled connection, after the store is open, bounded in time."""
        if not self._ready:
            await self.open()

        async def run() -> T:
            async with self._pool.connection(timeout=self._pool_timeout) as conn:
                return await work(conn)

        return await self._calls.run(run, doing)

    async def close(self) -> None:
        """Close the pool if this store made it; a shared pool stays open."""
        await self._calls.drain()
        if self._owns_pool:
            await self._pool.close()

    async def revisions(self) -> SyncRevisions:
        """Revision of every live invoice, read in pages of `REVISIONS_PAGE` by id as two
        binary arrays of 64-bit integers (a small account also reads its pending plan)."""

        async def read(conn: Conn) -> tuple[SyncRevisions, dict[int, PendingEntry]]:
            cursor = await conn.execute(
                _REVISIONS_AND_PENDING, (self.account, REVISIONS_PAGE, self.account), binary=True
            )
            rows = await cursor.fetchall()
            live = [row for row in rows if row[2] is None]
            pending = {row[0]: PendingEntry(*row) for row in rows if row[2] is not None}
            ids = array("q", [row[0] for row in live])
            # As adding each pair in turn would, with the arrays built in one go.
            found = SyncRevisions.from_arrays(ids, array("q", [row[1] for row in live]))
            page = len(ids)
            last = max(ids) if ids else 0
            while page == REVISIONS_PAGE:
                cursor = await conn.execute(
                    _REVISIONS_AFTER, (self.account, last, REVISIONS_PAGE), binary=True
                )
                rows = await cursor.fetchall()
                for ident, revision in rows:
                    found.add(ident, revision)
                page = len(rows)
                if rows:
                    last = rows[-1][0]
            return found, pending

        found, self._pending_read = await self._call(read, "cannot read revisions from")
        return found

    async def _rows(
        self, where: str, args: tuple[object, ...], limit: int | None = None
    ) -> list[tuple[int, bytes]]:
        async def read(conn: Conn) -> list[tuple[int, bytes]]:
            cursor = await conn.execute(
                "SELECT id, raw FROM invoicing_invoices WHERE account = %s"
                f" AND deleted_at IS NULL AND {where} ORDER BY id LIMIT %s",
                (self.account, *args, limit),
                binary=True,
            )
            return [(ident, bytes(doc)) for ident, doc in await cursor.fetchall()]

        return await self._call(read, "cannot read from")

    async def _select(self, column: str, value: object, wanted: int | None = None) -> list[Invoice]:
        """Text looked up as `_column` stores it; the lookups then compare the documents."""
        return await super()._select(
            column, _column(value) if isinstance(value, str) else value, wanted
        )

    async def deleted(self) -> dict[int, dt.datetime]:
        """Tombstones: id -> when the engine saw the invoice gone."""

        async def read(conn: Conn) -> dict[int, dt.datetime]:
            cursor = await conn.execute(
                "SELECT id, deleted_at FROM invoicing_invoices"
                " WHERE account = %s AND deleted_at IS NOT NULL",
                (self.account,),
            )
            return dict(await cursor.fetchall())

        return await self._call(read, "cannot read tombstones from")

    async def pending(self) -> dict[int, PendingEntry]:
        """The pending plan; the one `revisions()` read with its first page, if it was
        the last call (as a sync's plan reads them), else read now."""
        if self._pending_read is not None:
            found, self._pending_read = self._pending_read, None
            self._pending_stored = bool(found)
            return found

        async def read(conn: Conn) -> dict[int, PendingEntry]:
            cursor = await conn.execute(
                "SELECT id, revision, attempts, quarantined, since FROM invoicing_pending"
                " WHERE account = %s",
                (self.account,),
            )
            return {row[0]: PendingEntry(*row) for row in await cursor.fetchall()}

        found = await self._call(read, "cannot read the pending plan from")
        self._pending_stored = bool(found)
        return found

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        """Write a batch in one statement; `UPSERT_BATCH` applies `write_outcome` in SQL (an id
        given twice is written once, the later of equal revisions)."""
        chosen = newest(documents)
        if not chosen:
            return BatchResult(created=[], updated=[], stale=[])
        params = {
            "account": self.account,
            "ids": [doc.id for doc in chosen],
            "revisions": [doc.revision or 0 for doc in chosen],
            "numbers": [_column(doc.invoice_number) for doc in chosen],
            "states": [_column(doc.state) for doc in chosen],
            "contacts": [doc.contact_id for doc in chosen],
            "documents": [doc.document for doc in chosen],
        }

        async def write(conn: Conn) -> list[tuple[int, str]]:
            cursor = await conn.execute(UPSERT_BATCH, params)
            return [(int(ident), str(outcome)) for ident, outcome in await cursor.fetchall()]

        outcomes = await self._call(write, "cannot write a batch to")
        sorted_out: dict[str, list[int]] = {"created": [], "updated": [], "stale": []}
        for ident, outcome in outcomes:
            sorted_out[outcome].append(ident)
        return BatchResult(**sorted_out)

    async def apply_deletions(self, ids: Iterable[int], at: dt.datetime) -> int:
        id_list = sorted(set(ids))
        if not id_list:
            return 0

        async def write(conn: Conn) -> int:
            cursor = await conn.execute(
                "UPDATE invoicing_invoices SET deleted_at = %s WHERE account = %s"
                " AND deleted_at IS NULL AND id = ANY(%s::bigint[])",
                (at, self.account, id_list),
            )
            return cursor.rowcount

        return await self._call(write, "cannot write deletions to")

    async def save_pending(self, entries: Mapping[int, PendingEntry]) -> None:
        """Replace the account's pending plan, in one statement (nothing when both are empty)."""
        rows = sorted(entries.values(), key=lambda e: e.id)
        if not rows and self._pending_stored is False:
            return

        ids = [e.id for e in rows]

        async def write(conn: Conn) -> None:
            await conn.execute(
                _SAVE_PENDING,
                (
                    self.account,
                    ids,
                    self.account,
                    ids,
                    [e.revision for e in rows],
                    [e.attempts for e in rows],
                    [bool(e.quarantined) for e in rows],
                    [float(e.since) for e in rows],  # one type a list, in binary
                ),
            )

        self._pending_read = None
        self._pending_stored = None  # unknown until the write is known to have landed
        await self._call(write, "cannot save the pending plan to")
        self._pending_stored = bool(rows)


def _column(text: str | None) -> str | None:
    """A string for a text column: PostgreSQL's text cannot hold NUL, so it is stored as
    U+FFFD (the document keeps the original; lookups compare against the document)."""
    return None if text is None else text.replace("\x00", "\ufffd")


# One statement a batch; `before` holds each id's state before it (a revived tombstone
# counts as created). The upsert skips rows stored at a newer revision (stale). Rows go
# in id order so that concurrent batches cannot deadlock. `raw` keeps the bytes as sent.
UPSERT_BATCH = """
WITH input AS (
    SELECT * FROM unnest(
        %(ids)b::bigint[], %(revisions)b::bigint[], %(numbers)b::text[],
        %(states)b::text[], %(contacts)b::bigint[], %(documents)b::bytea[]
    ) WITH ORDINALITY AS t(id, revision, invoice_number, state, contact_id, document, ord)
),
before AS (
    SELECT cur.id, cur.deleted_at IS NOT NULL AS tombstone
    FROM invoicing_invoices cur JOIN input USING (id)
    WHERE cur.account = %(account)s
),
written AS (
    INSERT INTO invoicing_invoices AS cur (account, id, revision, invoice_number, state,
                                           contact_id, document, raw, synced_at, deleted_at)
    SELECT %(account)s, id, revision, invoice_number, state, contact_id,
           invoicing_document_v1(document), document, now(), NULL
    FROM input ORDER BY id
    ON CONFLICT (account, id) DO UPDATE SET
        revision = excluded.revision, invoice_number = excluded.invoice_number,
        state = excluded.state, contact_id = excluded.contact_id,
        document = excluded.document, raw = excluded.raw,
        synced_at = excluded.synced_at, deleted_at = NULL
    WHERE cur.deleted_at IS NOT NULL OR excluded.revision >= cur.revision
    RETURNING cur.id, cur.xmax = 0 AS inserted
),
unpended AS (
    DELETE FROM invoicing_pending p USING input
    WHERE p.account = %(account)s AND p.id = input.id
)
SELECT input.id,
       CASE WHEN w.id IS NULL THEN 'stale'
            WHEN w.inserted OR coalesce(b.tombstone, false) THEN 'created'
            ELSE 'updated' END
FROM input LEFT JOIN written w USING (id) LEFT JOIN before b USING (id)
ORDER BY input.ord
"""
