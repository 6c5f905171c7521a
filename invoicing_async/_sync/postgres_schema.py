"""The PostgreSQL store's schema: numbered migrations and the code that applies them.

The applied versions live in `invoicing_schema`, one row per migration. Migrating takes a
transaction-scoped advisory lock, so processes that start at once apply each migration
exactly once (the others wait, then find it done). A database at a version newer than
this package knows is refused before anything is written to it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import attrs

from invoicing_async._jobs.schema import V2_ACCOUNTS_AND_RUNS
from invoicing_async._sync.postgres_connect import error_for, require_psycopg, where_of
from invoicing_async.errors import StoreError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow

__all__ = [
    "LOCK_KEY",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Migration",
    "apply",
    "migrate",
    "read_version",
]

#: Advisory lock key of the store's migrations (the budget's is 7305841960128).
LOCK_KEY = 7305841960129


@attrs.frozen
class Migration:
    """One step of the schema: applied in order, once, in one transaction."""

    version: int
    description: str
    sql: str


_V1 = """
CREATE TABLE invoicing_invoices (
    account text NOT NULL,
    id bigint NOT NULL,
    revision bigint NOT NULL,
    invoice_number text,
    state text,
    contact_id bigint,
    document bytea NOT NULL,
    synced_at timestamptz NOT NULL,
    deleted_at timestamptz,
    PRIMARY KEY (account, id)
);
CREATE INDEX invoicing_invoices_number ON invoicing_invoices (account, invoice_number);
CREATE INDEX invoicing_invoices_state ON invoicing_invoices (account, state);
CREATE INDEX invoicing_invoices_contact ON invoicing_invoices (account, contact_id);
CREATE TABLE invoicing_pending (
    account text NOT NULL,
    id bigint NOT NULL,
    revision bigint NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    quarantined boolean NOT NULL DEFAULT false,
    since double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (account, id)
);
"""

#: Every migration, in order; a new one is appended, never edited once released.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "invoices with tombstones and the pending plan, keyed by account", _V1),
    Migration(2, "accounts (secrets by reference) and their sync runs", V2_ACCOUNTS_AND_RUNS),
)
SCHEMA_VERSION = MIGRATIONS[-1].version

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS invoicing_schema (
    version integer PRIMARY KEY,
    description text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


async def read_version(conn: AsyncConnection[TupleRow], where: str) -> int:
    """The database's schema version (0 when it has none yet); reads only.

    Raises `StoreError` for a version newer than this package's, or for store tables
    without a version table (not ours, or damaged).
    """
    # A scan of pg_class, not to_regclass(): name lookups go through a cache that a
    # transaction waiting on the advisory lock may hold stale (tables another process
    # created meanwhile look missing); locking pg_class to scan it also refreshes it.
    cursor = await conn.execute(
        "SELECT coalesce(bool_or(c.relname = 'invoicing_schema'), false),"
        " coalesce(bool_or(c.relname = 'invoicing_invoices'), false)"
        " FROM pg_catalog.pg_class c"
        " WHERE c.relnamespace = current_schema()::regnamespace"
        " AND c.relname IN ('invoicing_schema', 'invoicing_invoices')"
    )
    row = await cursor.fetchone()
    assert row is not None
    has_versions, has_invoices = row
    if not has_versions:
        if has_invoices:
            raise StoreError(
                f"{where} has an invoicing_invoices table but no invoicing_schema table: it "
                "was not made by invoicing-async; use another database or schema (the "
                "tables were not changed)"
            )
        return 0
    cursor = await conn.execute("SELECT coalesce(max(version), 0) FROM invoicing_schema")
    row = await cursor.fetchone()
    assert row is not None
    version = int(str(row[0]))
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{where} has schema version {version}, newer than this package's "
            f"{SCHEMA_VERSION}: upgrade invoicing-async; the database was not changed"
        )
    return version


async def apply(conn: AsyncConnection[TupleRow], where: str) -> list[int]:
    """Bring the schema up to `SCHEMA_VERSION`; returns the versions applied now.

    Reads first without locking (the common case: nothing to do); otherwise applies the
    missing migrations in one transaction under the advisory lock, reading the version
    again once the lock is held since another process may have migrated meanwhile.
    """
    async with conn.transaction():
        if await read_version(conn, where) == SCHEMA_VERSION:
            return []
    applied: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        current = await read_version(conn, where)
        if current < SCHEMA_VERSION:
            await conn.execute(_VERSION_TABLE)
        for migration in MIGRATIONS:
            if migration.version <= current:
                continue
            await conn.execute(migration.sql)
            await conn.execute(
                "INSERT INTO invoicing_schema (version, description) VALUES (%s, %s)",
                (migration.version, migration.description),
            )
            applied.append(migration.version)
    return applied


async def migrate(url: str, *, timeout: float = 60.0) -> list[int]:
    """Bring the store's schema in the database at `url` up to date: the versions applied.

    Safe to run from several processes at once (an advisory lock orders them); a database
    of a newer schema is refused with `StoreError`.
    """
    require_psycopg()
    import psycopg

    where = where_of(url)
    try:
        return await asyncio.wait_for(_migrate(url, where, timeout), timeout)
    except asyncio.TimeoutError as exc:
        raise StoreError(
            f"cannot migrate {where}: no answer within {timeout:g}s (check that the server "
            "is up and responsive, and that nothing holds a lock on the invoicing_ tables)"
        ) from exc
    except psycopg.Error as exc:
        raise error_for("cannot migrate", where, exc) from exc


async def _migrate(url: str, where: str, timeout: float) -> list[int]:
    import psycopg

    conn = await psycopg.AsyncConnection.connect(
        url, autocommit=True, connect_timeout=max(2, round(min(timeout, 10.0)))
    )
    async with conn:
        return await apply(conn, where)


# One statement a batch. All its parts see the table as it was before the statement, so
# `before` holds each id's state then: an id that was a tombstone (revived) counts as
# created, as SQLiteStore counts it. The upsert skips a row whose stored revision is
# newer (unless it was a tombstone): such ids do not come back from `written`, and are
# stale. Rows are inserted in id order so that concurrent batches lock
# overlapping rows in one order and cannot deadlock.
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
                                           contact_id, document, synced_at, deleted_at)
    SELECT %(account)s, id, revision, invoice_number, state, contact_id, document, now(), NULL
    FROM input ORDER BY id
    ON CONFLICT (account, id) DO UPDATE SET
        revision = excluded.revision, invoice_number = excluded.invoice_number,
        state = excluded.state, contact_id = excluded.contact_id,
        document = excluded.document, synced_at = excluded.synced_at, deleted_at = NULL
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
