"""A budget shared by processes on many machines through PostgreSQL.

The ledger's rule runs server-side in two PL/pgSQL functions, so taking a unit is one
round trip: a per-key advisory lock serializes takers, and `clock_timestamp()` is the
one clock every machine is timed by. Connections come from a psycopg 3 async pool with
connect, pool and statement timeouts; the budget adds an overall bound on each call.
"""

from __future__ import annotations

import asyncio
from typing import Any

from invoicing_async._budget.ledger import Grant, LedgerView, Refusal, new_unit_id
from invoicing_async._budget.stores import LedgerParams
from invoicing_async._extras import install_hint
from invoicing_async.errors import BudgetUnavailableError, ConfigurationError

__all__ = ["SCHEMA", "PostgresBudgetStore"]

# Versioned names: a newer release adds _v2 functions beside these instead of changing
# them under processes that still run the old code.
SCHEMA = """
CREATE TABLE IF NOT EXISTS invoicing_budget_units (
    key text NOT NULL,
    unit text NOT NULL,
    taken_at double precision NOT NULL,
    returns_at double precision NOT NULL,
    PRIMARY KEY (key, unit)
);

CREATE OR REPLACE FUNCTION invoicing_budget_view_v1(p_key text, p_now double precision)
RETURNS TABLE (o_returns_in double precision[], o_phantoms int)
LANGUAGE sql AS $$
    SELECT coalesce(array_agg(u.returns_at - p_now ORDER BY u.returns_at), '{}'),
           (count(*) FILTER (WHERE u.unit LIKE 'p%'))::int
    FROM invoicing_budget_units u WHERE u.key = p_key
$$;

CREATE OR REPLACE FUNCTION invoicing_budget_take_v1(
    p_key text, p_limit int, p_period double precision, p_hold double precision,
    p_keep int, p_unit text)
RETURNS TABLE (o_granted boolean, o_taken_at double precision, o_wait double precision,
               o_returns_in double precision[], o_phantoms int)
LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision;
    v_in_use int;
    v_at double precision;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('invoicing-budget:' || p_key, 0));
    v_now := extract(epoch FROM clock_timestamp());
    DELETE FROM invoicing_budget_units u WHERE u.key = p_key AND u.returns_at <= v_now;
    SELECT count(*) INTO v_in_use FROM invoicing_budget_units u WHERE u.key = p_key;
    o_taken_at := v_now;
    IF p_limit - v_in_use > p_keep THEN
        INSERT INTO invoicing_budget_units VALUES (p_key, p_unit, v_now, v_now + p_period + p_hold);
        o_granted := true;
        o_wait := 0;
    ELSE
        SELECT u.returns_at INTO v_at FROM invoicing_budget_units u WHERE u.key = p_key
            ORDER BY u.returns_at OFFSET v_in_use - (p_limit - p_keep - 1) - 1 LIMIT 1;
        o_granted := false;
        o_wait := greatest(0, coalesce(v_at, v_now + p_period) - v_now);
    END IF;
    SELECT v.o_returns_in, v.o_phantoms INTO o_returns_in, o_phantoms
        FROM invoicing_budget_view_v1(p_key, v_now) v;
    RETURN NEXT;
END
$$;

CREATE OR REPLACE FUNCTION invoicing_budget_settle_v1(
    p_key text, p_limit int, p_period double precision, p_unit text,
    p_taken_at double precision, p_sent boolean, p_remaining int)
RETURNS TABLE (o_returns_in double precision[], o_phantoms int)
LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision;
    v_after int;
    v_allowed int;
    v_free int;
    v_burn int;
    v_min_real double precision;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('invoicing-budget:' || p_key, 0));
    v_now := extract(epoch FROM clock_timestamp());
    DELETE FROM invoicing_budget_units u WHERE u.key = p_key AND u.returns_at <= v_now;
    IF NOT p_sent THEN
        DELETE FROM invoicing_budget_units u WHERE u.key = p_key AND u.unit = p_unit;
    ELSE
        UPDATE invoicing_budget_units u SET returns_at = least(u.returns_at, v_now + p_period)
            WHERE u.key = p_key AND u.unit = p_unit;
        IF p_remaining IS NOT NULL THEN
            SELECT count(*) INTO v_after FROM invoicing_budget_units u
                WHERE u.key = p_key AND u.unit LIKE 'r%' AND u.taken_at >= p_taken_at
                    AND u.unit <> p_unit;
            v_allowed := p_remaining - v_after;
            SELECT p_limit - count(*) INTO v_free FROM invoicing_budget_units u
                WHERE u.key = p_key;
            IF v_free > v_allowed THEN
                v_burn := v_free - greatest(0, v_allowed);
                IF v_allowed > 0 THEN
                    INSERT INTO invoicing_budget_units
                        SELECT p_key, 'p' || gen_random_uuid(), v_now, v_now + p_period
                        FROM generate_series(1, v_burn);
                ELSE
                    SELECT min(u.returns_at) INTO v_min_real FROM invoicing_budget_units u
                        WHERE u.key = p_key AND u.unit LIKE 'r%';
                    IF v_min_real IS NOT NULL THEN
                        INSERT INTO invoicing_budget_units
                            SELECT p_key, 'p' || gen_random_uuid(), v_now, v_min_real + p_period
                            FROM generate_series(1, v_burn);
                    ELSE
                        INSERT INTO invoicing_budget_units
                            SELECT p_key, 'p' || gen_random_uuid(), v_now,
                                   v_now + CASE WHEN g = 1 THEN 1 ELSE 2 END * p_period
                            FROM generate_series(1, v_burn) g;
                    END IF;
                END IF;
            ELSIF v_free < v_allowed THEN
                DELETE FROM invoicing_budget_units d WHERE d.key = p_key AND d.unit IN (
                    SELECT u.unit FROM invoicing_budget_units u
                    WHERE u.key = p_key AND u.unit LIKE 'p%'
                    ORDER BY u.returns_at DESC LIMIT v_allowed - v_free);
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM invoicing_budget_view_v1(p_key, v_now);
END
$$;
"""


class PostgresBudgetStore:
    """The ledger of every key in one PostgreSQL database (needs the `[postgres]` extra)."""

    shared = True

    def __init__(self, url: str, *, timeout: float = 5.0, max_connections: int = 4) -> None:
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError:
            raise ConfigurationError(
                f"a postgresql:// shared budget needs psycopg; {install_hint('postgres')}"
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
            "SELECT * FROM invoicing_budget_settle_v1("
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
