"""`Pool`: psycopg's pool whose opening fails fast with the server's reason (one direct
connection first, within `PROBE_TIMEOUT`), not ``PoolTimeout`` after its timeout."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from invoicing_async._postgres.reasons import error_for, where_of
from invoicing_async.errors import StoreError

__all__ = ["PROBE_TIMEOUT", "Pool", "connect"]

#: Seconds a first connection may take before opening a pool fails.
PROBE_TIMEOUT = 3.0


async def connect(conninfo: str, kwargs: dict[str, Any]) -> AsyncConnection[TupleRow]:
    """One connection, within `PROBE_TIMEOUT` seconds; a `StoreError` with the server's
    reason when it cannot be made."""
    where = where_of(conninfo)
    timeout = min(float(kwargs.get("connect_timeout") or PROBE_TIMEOUT), PROBE_TIMEOUT)
    settings = {**kwargs, "connect_timeout": max(2, round(timeout))}
    try:
        # libpq's own timeout counts whole seconds per host: the hard bound is ours.
        return await asyncio.wait_for(AsyncConnection.connect(conninfo, **settings), timeout)
    except asyncio.TimeoutError:
        raise StoreError(
            f"cannot connect to {where}: no answer within {timeout:g}s (check that the "
            "server is up, the URL's host and port, and the network)"
        ) from None
    except psycopg.Error as exc:
        raise error_for("cannot connect to", where, exc) from exc


class Pool(AsyncConnectionPool[AsyncConnection[TupleRow]]):
    """A psycopg `AsyncConnectionPool` that connects once (and hangs up) before it opens,
    however it is opened: ``await pool.open()``, ``async with pool`` or a store."""

    async def open(self, wait: bool = False, timeout: float = 30.0) -> None:
        if self.closed and isinstance(self.conninfo, str) and isinstance(self.kwargs, dict):
            await (await connect(self.conninfo, self.kwargs)).close()
        await super().open(wait=wait, timeout=timeout)
