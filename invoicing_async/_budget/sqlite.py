"""A budget shared by the processes of one machine through a SQLite file: each operation
is one `BEGIN IMMEDIATE` transaction applying the ledger's rule through the file's
indexes, timed by the file's own clock (`_now`)."""

from __future__ import annotations

import asyncio
import functools
import math
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple, TypeVar
from urllib.parse import unquote, urlsplit

from invoicing_async._budget.ledger import Grant, LedgerParams, LedgerView, Refusal, new_unit_id
from invoicing_async._budget.stores import Turns, keep_inherited, renew_after_fork
from invoicing_async._sqlite import retry_locked
from invoicing_async.errors import BudgetUnavailableError, ConfigurationError

__all__ = ["SKEW_TOLERANCE", "SQLiteBudgetStore", "machine_clock", "sqlite_path"]

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


@functools.cache
def _boot_id() -> str:
    """This boot of the machine (Linux), or "" where it cannot be read."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def machine_clock() -> tuple[str, float]:
    """This boot of the machine and its seconds since (suspend included on Linux): one
    clock for every process of the machine, which setting the wall clock does not move."""
    if sys.platform == "linux":
        return _boot_id(), time.clock_gettime(time.CLOCK_BOOTTIME)
    else:  # noqa: RET505 (the branch the type checker skips on Linux)
        return _boot_id(), time.monotonic()


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


class _FileLedger:
    """One key's ledger in the file, within one transaction: `MemoryLedger`'s rule."""

    def __init__(self, db: sqlite3.Connection, key: str, params: LedgerParams) -> None:
        self.db, self.key, self.limit, self.period = db, key, params.limit, params.period

    def _one(self, query: str, *args: Any) -> Any:
        return self.db.execute(query, (self.key, *args)).fetchone()

    def _count(self, ours: int, phantoms: int) -> None:
        self._one(
            "UPDATE budget_keys SET ours = ours + ?2, phantoms = phantoms + ?3 WHERE key = ?1",
            ours,
            phantoms,
        )

    def counts(self) -> tuple[int, int]:
        row = self._one("SELECT ours, phantoms FROM budget_keys WHERE key = ?")
        if row is None:
            self._one("INSERT INTO budget_keys (key) VALUES (?)")
            return 0, 0
        return int(row[0]), int(row[1])

    def expire(self, now: float) -> None:
        gone = self.db.execute(
            "DELETE FROM budget_units WHERE key = ? AND returns_at <= ?", (self.key, now)
        ).rowcount
        (due,) = self._one(
            "SELECT coalesce(sum(count), 0) FROM budget_phantoms WHERE key = ? AND returns_at <= ?",
            now,
        )
        if due:
            self._one("DELETE FROM budget_phantoms WHERE key = ? AND returns_at <= ?", now)
        if gone or due:
            self._count(-gone, -int(due))

    def take(self, now: float, hold: float, keep: int) -> Grant | Refusal:
        self.expire(now)
        ours, phantoms = self.counts()
        in_use = ours + phantoms
        if self.limit - in_use > keep:
            unit = new_unit_id()
            self._one(
                "INSERT INTO budget_units VALUES (?, ?, ?, ?, NULL)",
                unit,
                now,
                now + self.period + hold,
            )
            self._count(1, 0)
            return Grant(unit, now)
        needed = in_use - (self.limit - keep - 1)
        seen = 0
        at = now + self.period
        for returns_at, count in self.db.execute(
            "SELECT returns_at, 1 FROM budget_units WHERE key = ?1 UNION ALL "
            "SELECT returns_at, count FROM budget_phantoms WHERE key = ?1 ORDER BY 1",
            (self.key,),
        ):
            seen += count
            if seen >= needed:
                at = returns_at
                break
        return Refusal(max(0.0, at - now))

    def settle(
        self, now: float, unit: str, taken_at: float, sent: bool, remaining: int | None
    ) -> None:
        self.expire(now)
        if not sent:
            if self.db.execute(
                "DELETE FROM budget_units WHERE key = ? AND unit = ?", (self.key, unit)
            ).rowcount:
                self._count(-1, 0)
            return
        self._one(
            "UPDATE budget_units SET returns_at = min(returns_at, ?3), heard = ?4"
            " WHERE key = ?1 AND unit = ?2",
            unit,
            now + self.period,
            remaining,
        )
        if remaining is not None:
            self._heed_server(now, taken_at, remaining)

    def _heed_server(self, now: float, taken_at: float, remaining: int) -> None:
        ours, phantoms = self.counts()
        free = self.limit - ours - phantoms
        if not phantoms and free <= remaining - ours:
            return
        # Taken after and not counted first by the server's word (ledger.py's heed_server).
        (after,) = self._one(
            "SELECT count(*) FROM budget_units"
            " WHERE key = ?1 AND taken_at > ?2 AND coalesce(heard, ?3) <= ?3",
            taken_at,
            remaining,
        )
        allowed = remaining - after
        if free > allowed:
            count = free - max(0, allowed)
            if allowed > 0:
                self._add(now + self.period, count)
                return
            (soonest,) = self._one("SELECT min(returns_at) FROM budget_units WHERE key = ?")
            if soonest is not None:
                self._add(soonest + self.period, count)
            else:
                self._add(now + self.period, 1)
                self._add(now + 2 * self.period, count - 1)
        elif free < allowed:
            give = allowed - free
            blocks = self.db.execute(
                "SELECT returns_at, count FROM budget_phantoms WHERE key = ? "
                "ORDER BY returns_at DESC",
                (self.key,),
            ).fetchall()
            for at, held in blocks:
                if give <= 0:
                    break
                given = min(held, give)
                self._one(
                    "UPDATE budget_phantoms SET count = count - ?3"
                    " WHERE key = ?1 AND returns_at = ?2",
                    at,
                    given,
                )
                self._count(0, -given)
                give -= given
            self._one("DELETE FROM budget_phantoms WHERE key = ? AND count <= 0")

    def _add(self, at: float, count: int) -> None:
        if count > 0:
            self._one(
                "INSERT INTO budget_phantoms VALUES (?, ?, ?) ON CONFLICT (key, returns_at) "
                "DO UPDATE SET count = count + excluded.count",
                at,
                count,
            )
            self._count(0, count)

    def view(self, now: float) -> LedgerView:
        ours, phantoms = self.counts()
        (soonest,) = self._one(
            "SELECT min(at) FROM (SELECT min(returns_at) AS at FROM budget_units WHERE key = ?1"
            " UNION ALL SELECT min(returns_at) FROM budget_phantoms WHERE key = ?1)"
        )
        next_in = None if soonest is None else soonest - now
        return LedgerView(self.limit, ours + phantoms, phantoms, next_in)


class SQLiteBudgetStore:
    """The ledger of every key in one SQLite file (WAL mode, owner-only)."""

    shared = True
    turns: Turns

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
        steady: Callable[[], tuple[str, float]] = machine_clock,
    ) -> None:
        """`clock` is the wall clock, read once a boot to date the file's time; `steady`
        (see `machine_clock`) times everything else."""
        self.path = sqlite_path(url)
        self._timeout = timeout
        self._clock = clock
        self._steady = steady
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        # This store among the file's writers, and the least its clock was seen ahead of
        # each other writer's (see `_now`).
        self._writer = new_unit_id()
        self._ahead: dict[str, float] = {}
        # Its own thread: a frozen lock holder must not hold up the loop's default pool.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="invoicing-budget-sqlite")
        # Calls queued for that thread at once: each takes well under a millisecond there.
        self.turns = Turns(64, timeout)
        renew_after_fork(self)

    def _after_fork(self) -> None:
        """In a forked child: a thread and a connection of its own, opened on first use
        (the inherited executor's thread is gone: work given to it would never run)."""
        if self._db is not None:  # SQLite must not carry a connection across fork, and
            keep_inherited(self._db)  # closing it may checkpoint the parent's file
        self._db = None
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="invoicing-budget-sqlite")
        self.turns = Turns(64, self._timeout)  # the parent's waiters are not the child's

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
                    # No fsync per transaction (WAL keeps the file whole): a burst of takes
                    # is not held up by the disk; a power cut may forget the last few.
                    db.execute("PRAGMA synchronous=NORMAL")
                    db.executescript(_SCHEMA)

                try:
                    retry_locked(prepare, self._timeout)
                except BaseException:
                    db.close()  # a file still locked after the timeout: no connection left open
                    raise
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

        This process's time is the steady clock plus the file's offset, so wall-clock steps move
        no unit; the offset is set from the wall clock when the file is new and in each new boot
        (then the down time counts as none: held units come back late, never early).

        Units are settled at the file's high-water time, and taken by this clock less how far it
        runs ahead of the slowest other writer's (up to `SKEW_TOLERANCE`), so a clock ahead sees
        units back neither early nor late for ever."""
        boot, steady = self._steady()
        row = db.execute(
            "SELECT now, clock, writer, boot, base FROM budget_time WHERE id = 1"
        ).fetchone()
        high: float | None = None
        if row is None:
            base = self._clock() - steady
        else:
            high, clock, writer, base = float(row[0]), float(row[1]), str(row[2]), float(row[4])
            if row[3] != boot or (not boot and steady + base < high - SKEW_TOLERANCE):
                base = high - steady
                self._ahead.clear()
            elif writer != self._writer:
                gap = steady + base - clock
                self._ahead[writer] = min(gap, self._ahead.get(writer, math.inf))
        mine = steady + base
        ahead = max((g for g in self._ahead.values() if 0.0 < g <= SKEW_TOLERANCE), default=0.0)
        settle = mine if high is None else max(mine, high)
        db.execute(
            "INSERT INTO budget_time (id, now, clock, writer, boot, base)"
            " VALUES (1, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
            " now = excluded.now, clock = excluded.clock, writer = excluded.writer,"
            " boot = excluded.boot, base = excluded.base",
            (settle, mine, self._writer, boot, base),
        )
        return FileTime(take=mine - ahead, settle=settle)

    async def take(
        self, key: str, params: LedgerParams, *, hold: float, keep: int
    ) -> tuple[Grant | Refusal, LedgerView]:
        def operation(db: sqlite3.Connection, now: FileTime) -> tuple[Grant | Refusal, LedgerView]:
            ledger = _FileLedger(db, key, params)
            return ledger.take(now.take, hold, keep), ledger.view(now.take)

        return await self._run(operation)

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
        def operation(db: sqlite3.Connection, now: FileTime) -> LedgerView:
            ledger = _FileLedger(db, key, params)
            ledger.settle(now.settle, unit, taken_at, sent, remaining)
            return ledger.view(now.take)

        return await self._run(operation)

    async def view(self, key: str, params: LedgerParams) -> LedgerView:
        def operation(db: sqlite3.Connection, now: FileTime) -> LedgerView:
            ledger = _FileLedger(db, key, params)
            ledger.expire(now.take)
            return ledger.view(now.take)

        return await self._run(operation)

    async def close(self) -> None:
        # Queued calls are dropped (they would open the file again after it is closed).
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="invoicing-budget-sqlite")
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
