"""A budget shared by processes on many machines through PostgreSQL: the ledger's rule runs
in PL/pgSQL (``sql/``), one round trip a call under a per-key advisory lock, timed by
`clock_timestamp()`."""

from __future__ import annotations

import asyncio
from typing import Any

from invoicing_async._budget.ledger import Grant, LedgerParams, LedgerView, Refusal, new_unit_id
from invoicing_async._budget.stores import Turns, keep_inherited, renew_after_fork
from invoicing_async._postgres.connect import connection_pool, require_psycopg
from invoicing_async._postgres.migrations import Component, apply
from invoicing_async._postgres.reasons import where_of
from invoicing_async.errors import BudgetUnavailableError, StoreError

__all__ = ["SCHEMA", "PostgresBudgetStore"]

#: The budget's tables and functions: the migration in ``_budget/sql/``.
SCHEMA = Component("budget", "invoicing_async._budget")


class PostgresBudgetStore:
    """The ledger of every key in one PostgreSQL database (needs the `[postgres]` extra);
    with `pool`, its connections are borrowed and the pool left open on `close()`."""

    shared = True
    turns: Turns

    def __init__(
        self, url: str, *, timeout: float = 5.0, max_connections: int = 4, pool: Any = None
    ) -> None:
        require_psycopg("a postgresql:// shared budget")
        self.url = url
        self._timeout = timeout
        self._max_connections = max_connections
        self._shared_pool = pool
        self._pool: Any = None
        self._ready = asyncio.Lock()
        # A shared pool's other users may hold some of its connections too.
        size = max_connections if pool is None else int(getattr(pool, "max_size", 1))
        self.turns = Turns(size, timeout)
        renew_after_fork(self)

    def _after_fork(self) -> None:
        """In a forked child: a pool of its own, opened on first use (the parent's pool runs
        on the parent's loop, over the parent's sockets); the parent's is kept, unused. A
        pool passed in is its owner's to make anew in the child."""
        if self._pool is not None and self._pool is not self._shared_pool:
            keep_inherited(self._pool)
            self._pool = None
        self._ready = asyncio.Lock()
        self.turns = Turns(self.turns.size, self._timeout)

    async def _get_pool(self) -> Any:
        async with self._ready:
            if self._pool is None:
                pool = self._shared_pool or connection_pool(
                    self.url,
                    max_size=self._max_connections,
                    connect_timeout=self._timeout,
                    statement_timeout=self._timeout,
                    pool_timeout=self._timeout,
                    application_name="invoicing-async budget",
                )
                try:
                    if pool is not self._shared_pool:
                        await pool.open()
                    async with pool.connection(timeout=self._timeout) as conn:
                        await apply(conn, [SCHEMA], where_of(self.url))
                except Exception as exc:
                    if pool is not self._shared_pool:
                        await pool.close()
                    text = str(exc)
                    if not isinstance(exc, StoreError):  # ours name where and why
                        text = f"{type(exc).__name__}: {text}"
                    raise BudgetUnavailableError(f"PostgreSQL unreachable: {text}") from exc
                except BaseException:
                    # Given up on (the budget's store_timeout): its workers stop too.
                    if pool is not self._shared_pool:
                        await pool.close(timeout=1.0)
                    raise
                self._pool = pool
            return self._pool

    async def _fetch(self, query: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        pool = await self._get_pool()
        try:
            async with pool.connection() as conn:
                cursor = await conn.execute(query, args, prepare=True)
                row = await cursor.fetchone()
        except Exception as exc:
            raise BudgetUnavailableError(f"PostgreSQL failed: {type(exc).__name__}: {exc}") from exc
        assert row is not None
        return tuple(row)

    async def take(
        self, key: str, params: LedgerParams, *, hold: float, keep: int
    ) -> tuple[Grant | Refusal, LedgerView]:
        unit = new_unit_id()
        granted, taken_at, wait, in_use, phantoms, next_in = await self._fetch(
            "SELECT * FROM invoicing_budget_take(%s, %s::int, %s::float8, %s::float8, %s::int, %s)",
            (key, params.limit, params.period, hold, keep, unit),
        )
        view = LedgerView(params.limit, in_use, phantoms, next_in)
        return (Grant(unit, taken_at) if granted else Refusal(wait)), view

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
        in_use, phantoms, next_in = await self._fetch(
            "SELECT * FROM invoicing_budget_settle("
            "%s, %s::int, %s::float8, %s, %s::float8, %s::bool, %s::int)",
            (key, params.limit, params.period, unit, taken_at, sent, remaining),
        )
        return LedgerView(params.limit, in_use, phantoms, next_in)

    async def view(self, key: str, params: LedgerParams) -> LedgerView:
        # Settling an unknown unit with no news forgets what came back and changes nothing.
        return await self.settle(key, params, "", 0.0, sent=True, remaining=None)

    async def close(self) -> None:
        """Close the pool if this store made it; a shared pool stays open."""
        if self._pool is not None and self._pool is not self._shared_pool:
            await self._pool.close()
        self._pool = None
