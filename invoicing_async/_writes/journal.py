"""Where keyed writes are recorded: in memory (the default), a SQLite file or PostgreSQL.
Every store claims a key atomically, so writers sharing one journal apply a key once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import re
import socket
import sqlite3
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, TypeVar

from invoicing_async._writes.core import Claim, Intent, Record, Step, decide_claim
from invoicing_async.errors import JournalError

__all__ = ["Journal", "MemoryJournal", "SQLiteJournal", "new_owner", "open_journal", "owner_alive"]

T = TypeVar("T")
_NAMED = re.compile(r"^-- name: (\w+)\n(.*?);?\s*(?=^-- name: |\Z)", re.MULTILINE | re.DOTALL)
_COMMENT = re.compile(r"^--(?! name: ).*\n", re.MULTILINE)


@functools.cache
def queries() -> dict[str, str]:
    """The journal's statements by name (``queries.sql``), placeholders as `?`."""
    text = (resources.files("invoicing_async._writes") / "queries.sql").read_text("utf-8")
    return {m[1]: m[2] for m in _NAMED.finditer(_COMMENT.sub("", text))}


_HOST = socket.gethostname()


def new_owner() -> str:
    """This writer's name in the journal: host, process and a token of its own."""
    return f"{_HOST}:{os.getpid()}:{os.urandom(4).hex()}"


def owner_alive(owner: str) -> bool:
    """False only when the owner is known gone: a process of this host that no longer runs
    (a writer on another host is trusted until its lease ends)."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != _HOST or not pid_text.isdigit():
        return True
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Journal(Protocol):
    """What the keyed writes need of a journal (each call one transaction)."""

    where: str

    async def claim(self, intent: Intent, owner: str, lease_until: float) -> Claim: ...

    async def applied(
        self, intent: Intent, owner: str, result: bytes, result_id: int | None
    ) -> None: ...

    async def release(self, intent: Intent, owner: str) -> None: ...

    async def expire(self, intent: Intent, owner: str) -> None: ...

    async def record(self, scope: str, key: str) -> Record | None: ...

    async def pending(self, scope: str) -> list[Record]: ...

    async def close(self) -> None: ...


def _row_record(row: Sequence[Any]) -> Record:
    (scope, key, kind, target, fp, detail, at, since_id, state, owner, lease, result, result_id) = (
        row
    )
    intent = Intent(
        scope=scope,
        key=key,
        kind=kind,
        target=target,
        fingerprint=fp,
        detail=detail,
        at=float(at),
        since_id=since_id,
    )
    return Record(
        intent=intent,
        state=state,
        owner=owner,
        lease_until=float(lease),
        result=None if result is None else bytes(result),
        result_id=result_id,
    )


def _claim_existing(existing: Record, intent: Intent) -> Claim:
    step = decide_claim(existing, intent, now=time.time(), owner_alive=owner_alive(existing.owner))
    return Claim(step, existing)


class MemoryJournal:
    """The default journal: this process's keys, for as long as the client lives."""

    where = "the in-memory journal"

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], Record] = {}
        # The newest invoice id a keyed create of each scope made: a new create's look starts
        # there (kept as records are applied, so a claim costs the same with a million keys).
        self._newest_created: dict[str, int] = {}

    async def claim(self, intent: Intent, owner: str, lease_until: float) -> Claim:
        slot = (intent.scope, intent.key)
        existing = self._records.get(slot)
        if existing is None:
            since = (
                self._newest_created.get(intent.scope) if intent.kind == "create_invoice" else None
            )
            mine = Record(intent.with_since(since), "pending", owner, lease_until)
            self._records[slot] = mine
            return Claim(Step.SEND, mine)
        claim = _claim_existing(existing, intent)
        if claim.step is Step.SETTLE:
            taken = Record(existing.intent, "pending", owner, lease_until)
            self._records[slot] = taken
            return Claim(Step.SETTLE, taken)
        return claim

    async def applied(
        self, intent: Intent, owner: str, result: bytes, result_id: int | None
    ) -> None:
        slot = (intent.scope, intent.key)
        current = self._records.get(slot)
        if current is not None and current.owner == owner:
            self._records[slot] = Record(current.intent, "applied", owner, 0.0, result, result_id)
            if result_id is not None and current.intent.kind == "create_invoice":
                newest = self._newest_created.get(intent.scope)
                if newest is None or result_id > newest:
                    self._newest_created[intent.scope] = result_id

    async def release(self, intent: Intent, owner: str) -> None:
        slot = (intent.scope, intent.key)
        current = self._records.get(slot)
        if current is not None and current.owner == owner and current.state == "pending":
            del self._records[slot]

    async def expire(self, intent: Intent, owner: str) -> None:
        slot = (intent.scope, intent.key)
        current = self._records.get(slot)
        if current is not None and current.owner == owner:
            self._records[slot] = Record(
                current.intent, current.state, owner, 0.0, current.result, current.result_id
            )

    async def record(self, scope: str, key: str) -> Record | None:
        return self._records.get((scope, key))

    async def pending(self, scope: str) -> list[Record]:
        return [
            r for r in self._records.values() if r.intent.scope == scope and r.state == "pending"
        ]

    async def close(self) -> None:
        return None


_SQLITE_SCHEMA = (
    resources.files("invoicing_async._writes") / "sql" / "sqlite" / "schema.sql"
).read_text("utf-8")


class SQLiteJournal:
    """Keys in one SQLite file (WAL), shared by the processes of one machine: a claim is one
    `BEGIN IMMEDIATE` transaction, so two writers of one key at once give one effect."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.where = f"the write journal {self.path}"
        self._busy_timeout = busy_timeout
        self._db: sqlite3.Connection | None = None
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="journal")
        self._lock = asyncio.Lock()

    def _open(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        try:
            if not self.path.exists():
                fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
                os.close(fd)
            db = sqlite3.connect(
                self.path, timeout=self._busy_timeout, check_same_thread=False, isolation_level=None
            )
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(
                f"cannot open {self.where}: {exc}; nothing was sent (check the path and its "
                "permissions)"
            ) from exc
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SQLITE_SCHEMA)
            db.execute("SELECT count(*) FROM invoicing_writes LIMIT 1").fetchone()
        except sqlite3.Error as exc:
            db.close()
            raise self._error(exc) from exc
        self._db = db
        return db

    def _error(self, exc: sqlite3.Error) -> JournalError:
        return JournalError(
            f"{self.where} cannot be used ({exc}); it may be corrupt or not a journal: "
            "nothing was sent. Move it aside to start a new one (its pending keys are then "
            "forgotten)"
        )

    async def _run(self, step: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            db = self._open()
            try:
                return step(db)
            except sqlite3.Error as exc:
                if db.in_transaction:
                    db.rollback()
                raise self._error(exc) from exc

        async with self._lock:
            return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    async def claim(self, intent: Intent, owner: str, lease_until: float) -> Claim:
        sql = queries()

        def step(db: sqlite3.Connection) -> Claim:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute(sql["select_record"], (intent.scope, intent.key)).fetchone()
            if row is None:
                since = None
                if intent.kind == "create_invoice":
                    since = db.execute(sql["high_water"], (intent.scope,)).fetchone()[0]
                mine = intent.with_since(since)
                db.execute(
                    sql["insert_intent"],
                    (*mine, owner, lease_until),  # the intent's fields in the table's order
                )
                db.execute("COMMIT")
                return Claim(Step.SEND, Record(mine, "pending", owner, lease_until))
            existing = _row_record(row)
            try:
                claim = _claim_existing(existing, intent)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            if claim.step is Step.SETTLE:
                db.execute(sql["take_over"], (owner, lease_until, intent.scope, intent.key))
                claim = Claim(Step.SETTLE, Record(existing.intent, "pending", owner, lease_until))
            db.execute("COMMIT")
            return claim

        return await self._run(step)

    async def applied(
        self, intent: Intent, owner: str, result: bytes, result_id: int | None
    ) -> None:
        args = (result, result_id, intent.scope, intent.key, owner)
        await self._run(lambda db: db.execute(queries()["applied"], args))

    async def release(self, intent: Intent, owner: str) -> None:
        args = (intent.scope, intent.key, owner)
        await self._run(lambda db: db.execute(queries()["release"], args))

    async def expire(self, intent: Intent, owner: str) -> None:
        args = (intent.scope, intent.key, owner)
        await self._run(lambda db: db.execute(queries()["expire"], args))

    async def record(self, scope: str, key: str) -> Record | None:
        def step(db: sqlite3.Connection) -> Record | None:
            row = db.execute(queries()["select_record"], (scope, key)).fetchone()
            return None if row is None else _row_record(row)

        return await self._run(step)

    async def pending(self, scope: str) -> list[Record]:
        def step(db: sqlite3.Connection) -> list[Record]:
            return [_row_record(r) for r in db.execute(queries()["pending"], (scope,))]

        return await self._run(step)

    async def close(self) -> None:
        def shut() -> None:
            if self._db is not None:
                self._db.close()
                self._db = None

        await asyncio.get_running_loop().run_in_executor(self._pool, shut)
        self._pool.shutdown(wait=False)


def open_journal(journal: str | Journal | None) -> Journal:
    """The journal a client's `journal=` names: None (in memory), ``sqlite:///path``,
    ``postgresql://…`` or a journal object."""
    if journal is None:
        return MemoryJournal()
    if not isinstance(journal, str):
        return journal
    if journal.startswith("sqlite:///"):
        return SQLiteJournal(journal[len("sqlite:///") :])
    if journal.startswith(("postgresql://", "postgres://")):
        from invoicing_async._writes.postgres import PostgresJournal

        return PostgresJournal(journal)
    raise JournalError(
        f"journal={journal!r}: give sqlite:///path, a postgresql:// URL, or leave it out "
        "(in memory)"
    )
