"""A budget shared by processes on many machines through PostgreSQL.

The ledger's rule runs server-side in two PL/pgSQL functions, so taking a unit is one
round trip: a per-key advisory lock serializes takers, and `clock_timestamp()` is the
one clock every machine is timed by. Connections come from a psycopg 3 async pool with
connect, pool and statement timeouts; the budget adds an overall bound on each call.
"""

from __future__ import annotations

import asyncio
from importlib import resources
from typing import Any

from invoicing_async._budget.ledger import Grant, LedgerView, Refusal, new_unit_id
from invoicing_async._budget.stores import LedgerParams
from invoicing_async.errors import BudgetUnavailableError, ConfigurationError

__all__ = ["SCHEMA", "PostgresBudgetStore"]

#: The budget's table and functions (``sql/NNNN_name.sql``, package data), in order.
SCHEMA = "\n".join(
    entry.read_text("utf-8")
    for entry in sorted(
        (resources.files("invoicing_async._budget") / "sql").iterdir(), key=lambda e: e.name
    )
    if entry.name.endswith(".sql")
)


class PostgresBudgetStore:
    """The ledger of every key in one PostgreSQL database (needs the `[postgres]` extra)."""

    shared = True

    def __init__(self, url: str, *, timeout: float = 5.0, max_connections: int = 4) -> None:
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError:
            raise ConfigurationError(
                "a postgresql:// shared budget needs psycopg: "
                "pip install 'invoicing-async[postgres]'"
            ) from None
        self.url = url
        self._timeout = timeout
        self._max_connections = max_connections
        self._pool: Any = None
        self._ready = asyncio.Lock()

    async def _get_pool(self) -> Any:
        async with self._ready:
            if self._pool is None:
                from psycopg_pool import AsyncConnectionPool

                statement_ms = int(self._timeout * 1000)
                pool = AsyncConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=self._max_connections,
                    timeout=self._timeout,
                    open=False,
                    kwargs={
                        "autocommit": True,
                        "connect_timeout": max(2, int(self._timeout)),
                        "options": f"-c statement_timeout={statement_ms}",
                        "application_name": "invoicing-async budget",
                    },
                )
                try:
                    await pool.open(wait=True, timeout=self._timeout)
                    async with pool.connection() as conn, conn.transaction():
                        # One process at a time creates or replaces the functions.
                        await conn.execute("SELECT pg_advisory_xact_lock(7305841960128)")
                        await conn.execute(SCHEMA)
                except Exception as exc:
                    await pool.close()
                    raise BudgetUnavailableError(
                        f"PostgreSQL unreachable: {type(exc).__name__}: {exc}"
                    ) from exc
                except BaseException:
                    # Given up on (the budget's store_timeout): its workers stop too.
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
        granted, taken_at, wait, returns, phantoms = await self._fetch(
            "SELECT * FROM invoicing_budget_take_v1("
            "%s, %s::int, %s::float8, %s::float8, %s::int, %s)",
            (key, params.limit, params.period, hold, keep, unit),
        )
        view = LedgerView(params.limit, len(returns), phantoms, tuple(returns))
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
        returns, phantoms = await self._fetch(
            "SELECT * FROM invoicing_budget_settle_v2("
            "%s, %s::int, %s::float8, %s, %s::float8, %s::bool, %s::int)",
            (key, params.limit, params.period, unit, taken_at, sent, remaining),
        )
        return LedgerView(params.limit, len(returns), phantoms, tuple(returns))

    async def view(self, key: str, params: LedgerParams) -> LedgerView:
        returns, phantoms = await self._fetch(
            "SELECT * FROM invoicing_budget_view_v1(%s, extract(epoch FROM clock_timestamp()))",
            (key,),
        )
        live = tuple(r for r in returns if r > 0)  # the view does not expire: skip those due
        return LedgerView(params.limit, len(live), phantoms, live)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
