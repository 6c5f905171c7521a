"""A budget shared by the processes of one machine through a SQLite file.

Each operation is one `BEGIN IMMEDIATE` transaction: it loads the key's units (at most
`limit` rows), applies the ledger's rule in Python and writes back what changed. The
clock is the file's own (`_now`): the latest time any process wrote, advanced by each
process as far as its own clock ran since.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import NamedTuple, TypeVar
from urllib.parse import unquote, urlsplit

from invoicing_async._budget.ledger import Grant, LedgerView, MemoryLedger, Refusal, Unit
from invoicing_async._budget.stores import LedgerParams
from invoicing_async._sqlite import retry_locked
from invoicing_async.errors import BudgetUnavailableError, ConfigurationError

__all__ = ["SKEW_TOLERANCE", "SQLiteBudgetStore", "sqlite_path"]

T = TypeVar("T")


class FileTime(NamedTuple):
    """The times one operation on the file uses: `take` to see which units are back,
    `settle` to date a settled unit (see `SQLiteBudgetStore._now`)."""

    take: float
    settle: float


#: Seconds a process's clock may run ahead of the others' without letting units back early.
SKEW_TOLERANCE = 60.0

#: The tables (``sql/sqlite/schema.sql``), made if missing on every open.
_SCHEMA = (resources.files("invoicing_async._budget") / "sql" / "sqlite" / "schema.sql").read_text(
    "utf-8"
)


def sqlite_path(url: str) -> Path:
    """`sqlite:///relative/path` or `sqlite:////absolute/path` (as SQLAlchemy spells them)."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise ConfigurationError(f"sqlite budget URL must name a local file, not {url!r}")
    path = unquote(parts.path)
    if path.startswith("/"):
        path = path[1:]  # sqlite:///x -> "x"; sqlite:////abs -> "/abs"
    if not path:
        raise ConfigurationError(f"sqlite budget URL names no file: {url!r}")
    return Path(path)


def _unchanged(ledger: MemoryLedger, now: float) -> None:  # noqa: ARG001 - the view only
    return None


class SQLiteBudgetStore:
    """The ledger of every key in one SQLite file (WAL mode, owner-only)."""

    shared = True

    def __init__(
        self, url: str, *, timeout: float = 5.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = sqlite_path(url)
        self._timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        # The file's time minus this process's clock, fixed at its first operation.
        self._offset: float | None = None
        # Its own thread: a frozen lock holder must not hold up the loop's default pool.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="invoicing-budget-sqlite")

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                if not self.path.exists():
                    os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
                db = sqlite3.connect(
                    self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
                )

                def prepare() -> None:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.executescript(_SCHEMA)

                retry_locked(prepare, self._timeout)
            except (OSError, sqlite3.Error) as exc:
                raise BudgetUnavailableError(
                    f"file {self.path}: {exc}; check the path and its permissions"
                ) from exc
            self._db = db
        return self._db

    async def _run(self, operation: Callable[[sqlite3.Connection, FileTime], T]) -> T:
        def work() -> T:
            with self._lock:
                db = self._connect()
                try:
                    db.execute("BEGIN IMMEDIATE")
                    try:
                        result = operation(db, self._now(db))
                    except BaseException:
                        db.execute("ROLLBACK")
                        raise
                    db.execute("COMMIT")
                    return result
                except sqlite3.Error as exc:
                    raise BudgetUnavailableError(f"shared budget file {self.path}: {exc}") from exc

        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    def _now(self, db: sqlite3.Connection) -> FileTime:
        """The times of one operation: each errs on the side of returning units later.

        A unit is settled at the file's high-water time (never behind what any process
        has written), so no process's slow clock returns it early. Units are taken by this
        process's own clock, less how far it ran ahead of the file's time when it first
        used the file (up to `SKEW_TOLERANCE`): a clock that is ahead does not see units
        back early, and a gap that was only idle time makes this process see them late,
        never early.
        """
        mine = self._clock()
        row = db.execute("SELECT now FROM budget_clock WHERE id = 1").fetchone()
        high: float | None = None if row is None else float(row[0])
        if self._offset is None:
            gap = 0.0 if high is None else mine - high
            self._offset = -gap if 0.0 < gap <= SKEW_TOLERANCE else 0.0
        settle = mine if high is None else max(mine, high)
        db.execute(
            "INSERT INTO budget_clock (id, now) VALUES (1, ?)"
            " ON CONFLICT (id) DO UPDATE SET now = excluded.now",
            (settle,),
        )
        return FileTime(take=mine + self._offset, settle=settle)

    @staticmethod
    def _load(db: sqlite3.Connection, key: str, params: LedgerParams) -> MemoryLedger:
        rows = db.execute(
            "SELECT unit, taken_at, returns_at FROM budget_units WHERE key = ?", (key,)
        ).fetchall()
        units = {unit: Unit(unit, taken, returns) for unit, taken, returns in rows}
        return MemoryLedger(params.limit, params.period, units)

    @staticmethod
    def _save(db: sqlite3.Connection, key: str, before: dict[str, tuple[float, float]],
              ledger: MemoryLedger) -> None:  # fmt: skip
        gone = [(key, unit) for unit in before if unit not in ledger.units]
        db.executemany("DELETE FROM budget_units WHERE key = ? AND unit = ?", gone)
        changed = [
            (key, u.id, u.taken_at, u.returns_at)
            for u in ledger.units.values()
            if before.get(u.id) != (u.taken_at, u.returns_at)
        ]
        db.executemany("INSERT OR REPLACE INTO budget_units VALUES (?, ?, ?, ?)", changed)

    def _apply(
        self,
        key: str,
        params: LedgerParams,
        change: Callable[[MemoryLedger, float], T],
        *,
        settling: bool = False,
    ) -> Callable[[sqlite3.Connection, FileTime], tuple[T, LedgerView]]:
        def operation(db: sqlite3.Connection, now: FileTime) -> tuple[T, LedgerView]:
            ledger = self._load(db, key, params)
            before = {u.id: (u.taken_at, u.returns_at) for u in ledger.units.values()}
            result = change(ledger, now.settle if settling else now.take)
            self._save(db, key, before, ledger)
            return result, ledger.view(now.take)

        return operation

    async def take(
        self, key: str, params: LedgerParams, *, hold: float, keep: int
    ) -> tuple[Grant | Refusal, LedgerView]:
        return await self._run(
            self._apply(key, params, lambda ledger, now: ledger.take(now, hold=hold, keep=keep))
        )

    async def settle(
        self,
        key: str,
        params: LedgerParams,
        unit: str,
        taken_at: float,
        *,
        sent: bool,
        remaining: int | None,
    ) -> LedgerView:
        def change(ledger: MemoryLedger, now: float) -> None:
            ledger.settle(now, unit, taken_at, sent=sent, remaining=remaining)

        _, view = await self._run(self._apply(key, params, change, settling=True))
        return view

    async def view(self, key: str, params: LedgerParams) -> LedgerView:
        _, view = await self._run(self._apply(key, params, _unchanged))
        return view

    async def close(self) -> None:
        self._executor.shutdown(wait=False)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="invoicing-budget-sqlite")
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
