"""`SQLiteStore`: the embedded default store. WAL mode, one writer, a versioned schema,
and each invoice's full document, so nothing the service sent is lost."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TypeVar

from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._resources.decoding import own_pool
from invoicing_async._sqlite import retry_locked
from invoicing_async._sync.store import (
    BatchResult,
    DocumentQueries,
    PendingEntry,
    WriteOutcome,
    write_outcome,
)
from invoicing_async._text import package_logger
from invoicing_async.errors import StoreError

logger = package_logger("invoicing_async.sync")

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

SCHEMA_VERSION = 1
T = TypeVar("T")

#: The tables (``sql/sqlite/schema.sql``): made if missing on every open.
_SCHEMA = (resources.files("invoicing_async._sync") / "sql" / "sqlite" / "schema.sql").read_text(
    "utf-8"
)


# SQLite's calls wait on locks (up to `busy_timeout`) and on the disk: in threads of
# their own, so they never hold up other work of the loop's default pool (`to_thread`).
_EXECUTOR_THREADS = 4


class SQLiteStore(DocumentQueries):
    """Invoices in one SQLite file, created owner-only (0600); calls run one at a time in a
    thread of the stores' own pool. Use ``async with SQLiteStore(path)`` or `close()`."""

    _MARK = "?"

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self.path = Path(path)
        self._lock = asyncio.Lock()
        try:
            if not self.path.exists():
                # Owner-only from the first byte: the documents hold customers' data.
                fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
                os.close(fd)
            # `timeout`: wait for other processes' transactions (several opening one new
            # file at once) instead of failing with "database is locked".
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, check_same_thread=False, isolation_level=None
            )
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"cannot open {self.path}: {exc}; check the path and its permissions"
            ) from exc
        try:
            self._prepare(busy_timeout)
        except BaseException as exc:
            self._db.close()
            if isinstance(exc, sqlite3.Error):
                raise self._error("cannot open", exc) from exc
            raise

    def _prepare(self, busy_timeout: float) -> None:
        """Check the version, set WAL and migrate, retrying SQLITE_BUSY (processes opening one
        new file at once) until `busy_timeout`."""

        def prepare() -> None:
            self._check_version()  # reads only: a file we cannot use is left as it is
            # A new file only: an invoice's few KB fit a page whole, and a batch commits
            # a quarter of the pages (6% less CPU a full sync); a file keeps its own size.
            self._db.execute("PRAGMA page_size=16384")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()

        retry_locked(prepare, busy_timeout)

    def _error(self, doing: str, exc: sqlite3.Error) -> StoreError:
        """A `StoreError` that names the file, SQLite's cause and what to do."""
        text = str(exc)
        lowered = f"{text} {getattr(exc, 'sqlite_errorname', '')}".lower()
        if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
            advice = "the file is corrupt or not a SQLite database: move it away and sync anew"
        elif "readonly" in lowered or "read-only" in lowered:
            advice = "the file or its folder is read-only: fix the permissions or use another path"
        elif "full" in lowered:
            advice = "the disk is full: free space and run again (nothing of this batch was kept)"
        elif "ioerr" in lowered or "i/o error" in lowered:
            advice = (
                "the disk may be full or failing: free space or check the disk, then run "
                "again (nothing of this batch was kept)"
            )
        elif "locked" in lowered or "busy" in lowered:
            advice = "another process holds the database: stop it or raise busy_timeout"
        else:
            advice = "see the SQLite message"
        return StoreError(f"{doing} {self.path}: {text} ({advice})")

    def _check_version(self) -> None:
        """Refuse a file of a newer or unknown schema before anything is written to it."""
        tables = {
            row[0]
            for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if not tables:
            return  # a new, empty file
        version: str | None = None
        if "meta" in tables:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = None if row is None else str(row[0])
        if version is None or not version.isdigit():
            raise StoreError(
                f"{self.path} is not an invoicing-async store (tables {sorted(tables)}, schema "
                f"version {version!r}): point the store at a new file; this one was not changed"
            )
        if int(version) > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this package's "
                f"{SCHEMA_VERSION}: upgrade invoicing-async; the file was not changed"
            )

    def _migrate(self) -> None:
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")  # one process creates; the others wait
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )

    async def _run(self, fn: Callable[[], T], doing: str = "cannot use") -> T:
        async with self._lock:
            work = asyncio.get_running_loop().run_in_executor(
                own_pool("invoicing-sqlite", _EXECUTOR_THREADS), fn
            )
            try:
                return await asyncio.shield(work)
            except asyncio.CancelledError:
                # A thread cannot be stopped: let it commit or roll back before anyone
                # else touches the connection (however often we are cancelled meanwhile),
                # then pass the cancellation on.
                while not work.done():
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait([work])
                if not work.cancelled() and work.exception() is not None:
                    logger.warning("store work finished after cancellation: %s", work.exception())
                raise
            except sqlite3.Error as exc:
                raise self._error(doing, exc) from exc

    async def __aenter__(self) -> SQLiteStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._run(self._db.close)

    async def revisions(self) -> dict[int, int]:
        def read() -> dict[int, int]:
            rows = self._db.execute("SELECT id, revision FROM invoices WHERE deleted_at IS NULL")
            return dict(rows)  # row by row: no list of a million tuples on the way

        return await self._run(read)

    async def _rows(
        self, where: str, args: tuple[object, ...], limit: int | None = None
    ) -> list[tuple[int, bytes]]:
        def read() -> list[tuple[int, bytes]]:
            return self._db.execute(
                f"SELECT id, document FROM invoices WHERE deleted_at IS NULL AND {where}"
                " ORDER BY id LIMIT ?",
                (*args, -1 if limit is None else limit),  # -1: no limit
            ).fetchall()

        return await self._run(read)

    async def deleted(self) -> dict[int, dt.datetime]:
        """Tombstones: id -> when the engine saw the invoice gone."""

        def read() -> dict[int, dt.datetime]:
            rows = self._db.execute(
                "SELECT id, deleted_at FROM invoices WHERE deleted_at IS NOT NULL"
            ).fetchall()
            return {i: dt.datetime.fromisoformat(at) for i, at in rows}

        return await self._run(read)

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        now = dt.datetime.now(dt.timezone.utc).isoformat()
        rows = [
            (d.id, d.revision or 0, d.invoice_number, d.state, d.contact_id, d.document, now)
            for d in documents
            if d.id is not None
        ]

        def write() -> BatchResult:
            outcomes: dict[WriteOutcome, list[int]] = {"created": [], "updated": [], "stale": []}
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
                fresh = []
                for row in rows:
                    before = existing.get(row[0])
                    stored, deleted = (None, False) if before is None else before
                    outcome = write_outcome(row[1], stored, deleted=deleted is not None)
                    outcomes[outcome].append(row[0])
                    if outcome != "stale":
                        fresh.append(row)
                db.executemany(
                    "INSERT INTO invoices (id, revision, invoice_number, state, contact_id,"
                    " document, synced_at, deleted_at) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)"
                    " ON CONFLICT (id) DO UPDATE SET revision = excluded.revision,"
                    " invoice_number = excluded.invoice_number, state = excluded.state,"
                    " contact_id = excluded.contact_id, document = excluded.document,"
                    " synced_at = excluded.synced_at, deleted_at = NULL",
                    fresh,
                )
                db.execute(f"DELETE FROM pending WHERE id IN ({marks})", ids)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # SQLite already rolled back after e.g. a full disk
                    db.execute("ROLLBACK")
                raise
            return BatchResult(**outcomes)

        if not rows:
            return BatchResult(created=[], updated=[], stale=[])
        return await self._run(write, "cannot write a batch to")

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
            return {i: PendingEntry(i, rev, att, bool(q), t) for i, rev, att, q, t in rows}

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
