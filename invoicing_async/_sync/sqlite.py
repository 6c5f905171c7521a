"""`SQLiteStore`: the embedded default store. WAL mode, one writer, a versioned schema,
and each invoice's full document, so nothing the service sent is lost."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from invoicing_async._models.documents import dump_model, load_model
from invoicing_async._sync.store import BatchResult, PendingEntry
from invoicing_async.models import Invoice

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

SCHEMA_VERSION = 1
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS invoices (
    id INTEGER PRIMARY KEY,
    revision INTEGER NOT NULL,
    invoice_number TEXT,
    state TEXT,
    contact_id INTEGER,
    document BLOB NOT NULL,
    synced_at TEXT NOT NULL,
    deleted_at TEXT
);
CREATE INDEX IF NOT EXISTS invoices_number ON invoices (invoice_number);
CREATE INDEX IF NOT EXISTS invoices_state ON invoices (state);
CREATE INDEX IF NOT EXISTS invoices_contact ON invoices (contact_id);
CREATE TABLE IF NOT EXISTS pending (
    id INTEGER PRIMARY KEY,
    revision INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    quarantined INTEGER NOT NULL DEFAULT 0,
    since REAL NOT NULL DEFAULT 0
);
"""


class SQLiteStore:
    """Invoices in one SQLite file, created owner-only (0600).

    Calls run in a worker thread, one at a time (SQLite has one writer). Use it as
    ``async with SQLiteStore(path) as store`` or call `close()`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.exists():
            # Owner-only from the first byte: the documents hold customers' data.
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._migrate()
        self._lock = asyncio.Lock()

    def _migrate(self) -> None:
        self._db.executescript(_SCHEMA)
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            self._db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
        elif int(row[0]) > SCHEMA_VERSION:
            raise RuntimeError(
                f"{self.path} has schema version {row[0]}, newer than this package's "
                f"{SCHEMA_VERSION}: upgrade invoicing-async"
            )

    async def _run(self, fn: Callable[[], T]) -> T:
        async with self._lock:
            work = asyncio.ensure_future(asyncio.to_thread(fn))
            try:
                return await asyncio.shield(work)
            except asyncio.CancelledError:
                # A thread cannot be stopped: let it commit or roll back before anyone
                # else touches the connection (however often we are cancelled meanwhile),
                # then pass the cancellation on.
                while not work.done():
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait([work])
                raise

    async def __aenter__(self) -> SQLiteStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._run(self._db.close)

    # -- reading ----------------------------------------------------------------------------

    async def revisions(self) -> dict[int, int]:
        def read() -> dict[int, int]:
            rows = self._db.execute("SELECT id, revision FROM invoices WHERE deleted_at IS NULL")
            return dict(rows)  # row by row: no list of a million tuples on the way

        return await self._run(read)

    def _load(self, rows: list[tuple[bytes]]) -> list[Invoice]:
        return [load_model(bytes(doc), "json", Invoice) for (doc,) in rows]

    async def _select(self, where: str, args: tuple[object, ...]) -> list[Invoice]:
        def read() -> list[Invoice]:
            rows = self._db.execute(
                f"SELECT document FROM invoices WHERE deleted_at IS NULL AND {where} ORDER BY id",
                args,
            ).fetchall()
            return self._load(rows)

        return await self._run(read)

    async def get(self, invoice_id: int) -> Invoice | None:
        found = await self._select("id = ?", (invoice_id,))
        return found[0] if found else None

    async def get_by_invoice_number(self, invoice_number: str) -> Invoice | None:
        found = await self._select("invoice_number = ?", (invoice_number,))
        return found[0] if found else None

    async def by_state(self, state: str) -> list[Invoice]:
        return await self._select("state = ?", (state,))

    async def by_contact(self, contact_id: int) -> list[Invoice]:
        return await self._select("contact_id = ?", (contact_id,))

    async def deleted(self) -> dict[int, dt.datetime]:
        """Tombstones: id -> when the engine saw the invoice gone."""

        def read() -> dict[int, dt.datetime]:
            rows = self._db.execute(
                "SELECT id, deleted_at FROM invoices WHERE deleted_at IS NOT NULL"
            ).fetchall()
            return {i: dt.datetime.fromisoformat(at) for i, at in rows}

        return await self._run(read)

    # -- writing ----------------------------------------------------------------------------

    async def apply_batch(self, invoices: Sequence[Invoice]) -> BatchResult:
        now = dt.datetime.now(dt.timezone.utc).isoformat()
        # Encoding is pure work: do it before taking the writer's turn.
        rows = [
            (
                inv.id,
                inv.revision or 0,
                inv.invoice_id,
                inv.state,
                inv.contact_id,
                dump_model(inv, "json", mode="document"),
                now,
            )
            for inv in invoices
            if inv.id is not None
        ]

        def write() -> BatchResult:
            created: list[int] = []
            updated: list[int] = []
            stale: list[int] = []
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                ids = [r[0] for r in rows]
                marks = ",".join("?" * len(ids))
                existing = {
                    i: (rev, deleted)
                    for i, rev, deleted in db.execute(
                        f"SELECT id, revision, deleted_at FROM invoices WHERE id IN ({marks})", ids
                    )
                }
                for row in rows:
                    before = existing.get(row[0])
                    if before is None or before[1] is not None:
                        created.append(row[0])
                    elif row[1] > before[0]:
                        updated.append(row[0])
                    else:
                        stale.append(row[0])
                        continue
                    db.execute(
                        "INSERT INTO invoices (id, revision, invoice_number, state, contact_id,"
                        " document, synced_at, deleted_at) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)"
                        " ON CONFLICT (id) DO UPDATE SET revision = excluded.revision,"
                        " invoice_number = excluded.invoice_number, state = excluded.state,"
                        " contact_id = excluded.contact_id, document = excluded.document,"
                        " synced_at = excluded.synced_at, deleted_at = NULL",
                        row,
                    )
                db.execute(f"DELETE FROM pending WHERE id IN ({marks})", ids)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return BatchResult(created=created, updated=updated, stale=stale)

        if not rows:
            return BatchResult(created=[], updated=[], stale=[])
        return await self._run(write)

    async def apply_deletions(self, ids: Iterable[int], at: dt.datetime) -> int:
        id_list = list(ids)

        def write() -> int:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                total = 0
                for start in range(0, len(id_list), 500):
                    chunk = id_list[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    cursor = self._db.execute(
                        f"UPDATE invoices SET deleted_at = ? WHERE deleted_at IS NULL"
                        f" AND id IN ({marks})",
                        [at.isoformat(), *chunk],
                    )
                    total += cursor.rowcount
                return total

        return await self._run(write) if id_list else 0

    async def pending(self) -> dict[int, PendingEntry]:
        def read() -> dict[int, PendingEntry]:
            rows = self._db.execute(
                "SELECT id, revision, attempts, quarantined, since FROM pending"
            )
            return {
                i: PendingEntry(id=i, revision=rev, attempts=att, quarantined=bool(q), since=t)
                for i, rev, att, q, t in rows.fetchall()
            }

        return await self._run(read)

    async def save_pending(self, entries: Mapping[int, PendingEntry]) -> None:
        rows = [
            (e.id, e.revision, e.attempts, int(e.quarantined), e.since) for e in entries.values()
        ]

        def write() -> None:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("DELETE FROM pending")
                self._db.executemany(
                    "INSERT INTO pending (id, revision, attempts, quarantined, since)"
                    " VALUES (?, ?, ?, ?, ?)",
                    rows,
                )

        await self._run(write)
