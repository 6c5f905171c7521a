"""`PostgresJournal`: keyed writes recorded in one PostgreSQL table (the `writes` component's
migration), shared by processes on many machines; a claim is one transaction on the key's row."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from invoicing_async._postgres.connect import connection_pool, require_psycopg
from invoicing_async._postgres.migrations import Component, apply
from invoicing_async._postgres.reasons import where_of
from invoicing_async._writes.core import Claim, Intent, Record, Step
from invoicing_async._writes.journal import _claim_existing, _row_record, queries
from invoicing_async.errors import IdempotencyKeyError, JournalError, StoreError

__all__ = ["SCHEMA", "PostgresJournal"]

#: The journal's table: the migration in ``_writes/sql/``.
SCHEMA = Component("writes", "invoicing_async._writes", sign="invoicing_writes")


@functools.cache
def _sql() -> dict[str, str]:
    return {name: text.replace("?", "%s") for name, text in queries().items()}


class PostgresJournal:
    """The journal in PostgreSQL (needs the `[postgres]` extra). Unreachable: `JournalError`
    before anything is sent."""

    def __init__(self, url: str, *, timeout: float = 10.0, max_connections: int = 2) -> None:
        require_psycopg("a postgresql:// write journal")
        self.url = url
        self.where = f"the write journal at {where_of(url)}"
        self._timeout = timeout
        self._max_connections = max_connections
        self._pool: Any = None
        self._ready = asyncio.Lock()

    async def _get_pool(self) -> Any:
        async with self._ready:
            if self._pool is None:
                pool = connection_pool(
                    self.url,
                    max_size=self._max_connections,
                    connect_timeout=self._timeout,
                    statement_timeout=self._timeout,
                    pool_timeout=self._timeout,
                    application_name="invoicing-async journal",
                )
                try:
                    await pool.open()
                    async with pool.connection(timeout=self._timeout) as conn:
                        await apply(conn, [SCHEMA], where_of(self.url))
                except BaseException as exc:
                    await pool.close()
                    if isinstance(exc, StoreError):
                        raise JournalError(f"{self.where}: {exc}; nothing was sent") from exc
                    if isinstance(exc, Exception):
                        raise JournalError(
                            f"cannot reach {self.where} ({type(exc).__name__}: {exc}); "
                            "nothing was sent"
                        ) from exc
                    raise
                self._pool = pool
            return self._pool

    async def _conn(self) -> Any:
        pool = await self._get_pool()
        return pool.connection(timeout=self._timeout)

    def _failed(self, exc: Exception) -> JournalError:
        return JournalError(f"{self.where} failed ({type(exc).__name__}: {exc}); nothing was sent")

    async def claim(self, intent: Intent, owner: str, lease_until: float) -> Claim:
        sql = _sql()
        try:
            async with await self._conn() as conn, conn.transaction():
                since = None
                if intent.kind == "create_invoice":
                    cursor = await conn.execute(sql["high_water"], (intent.scope,))
                    row = await cursor.fetchone()
                    since = None if row is None else row[0]
                mine = intent.with_since(since)
                cursor = await conn.execute(
                    sql["insert_intent"],
                    (*mine, owner, lease_until),  # the intent's fields in the table's order
                )
                if cursor.rowcount == 1:
                    return Claim(Step.SEND, Record(mine, "pending", owner, lease_until))
                cursor = await conn.execute(sql["lock_record"], (intent.scope, intent.key))
                found = await cursor.fetchone()
                assert found is not None
                existing = _row_record(found)
                claim = _claim_existing(existing, intent)
                if claim.step is Step.SETTLE:
                    await conn.execute(
                        sql["take_over"], (owner, lease_until, intent.scope, intent.key)
                    )
                    return Claim(
                        Step.SETTLE, Record(existing.intent, "pending", owner, lease_until)
                    )
                return claim
        except (JournalError, IdempotencyKeyError):
            raise
        except Exception as exc:
            raise self._failed(exc) from exc

    async def _execute(self, name: str, args: tuple[Any, ...]) -> list[Any]:
        try:
            async with await self._conn() as conn:
                cursor = await conn.execute(_sql()[name], args)
                return list(await cursor.fetchall()) if cursor.description else []
        except JournalError:
            raise
        except Exception as exc:
            raise self._failed(exc) from exc

    async def applied(
        self, intent: Intent, owner: str, result: bytes, result_id: int | None
    ) -> None:
        await self._execute("applied", (result, result_id, intent.scope, intent.key, owner))

    async def release(self, intent: Intent, owner: str) -> None:
        await self._execute("release", (intent.scope, intent.key, owner))

    async def expire(self, intent: Intent, owner: str) -> None:
        await self._execute("expire", (intent.scope, intent.key, owner))

    async def record(self, scope: str, key: str) -> Record | None:
        rows = await self._execute("select_record", (scope, key))
        return _row_record(rows[0]) if rows else None

    async def pending(self, scope: str) -> list[Record]:
        return [_row_record(r) for r in await self._execute("pending", (scope,))]

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
