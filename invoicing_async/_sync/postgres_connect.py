"""Connecting the PostgreSQL store: psycopg imported lazily, the pool with its timeouts,
and psycopg's errors as `StoreError`s that say where, what happened and what to check.

Importing this module imports nothing of psycopg (the `[postgres]` extra is optional);
errors are told apart by SQLSTATE and class name; a URL's password never reaches a message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from invoicing_async._extras import install_hint
from invoicing_async.errors import ConfigurationError, StoreError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow
    from psycopg_pool import AsyncConnectionPool

    Pool = AsyncConnectionPool[AsyncConnection[TupleRow]]

logger = logging.getLogger("invoicing_async.sync")

T = TypeVar("T")

__all__ = [
    "BoundedCalls",
    "connect_kwargs",
    "connection_pool",
    "describe",
    "error_for",
    "require_psycopg",
    "where_of",
]

_INSTALL = f"PostgresStore needs psycopg; {install_hint('postgres')}"


def require_psycopg() -> None:
    """Raise `ConfigurationError` naming the extra when psycopg is not installed."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise ConfigurationError(_INSTALL) from None


def connect_kwargs(connect_timeout: float, statement_timeout: float) -> dict[str, Any]:
    """Connection settings of the store's connections: autocommit (each statement is its
    own transaction unless a call opens one) and the timeouts."""
    return {
        "autocommit": True,
        # libpq takes whole seconds, and treats 1 as 2.
        "connect_timeout": max(2, round(connect_timeout)),
        "options": f"-c statement_timeout={int(statement_timeout * 1000)}",
        "application_name": "invoicing-async store",
    }


def connection_pool(
    url: str,
    *,
    max_size: int = 10,
    connect_timeout: float = 5.0,
    statement_timeout: float = 24.0,
    pool_timeout: float = 10.0,
) -> Pool:
    """A pool configured as `PostgresStore` configures its own (not opened yet).

    Pass it to several stores to share connections between accounts; open it with
    ``async with connection_pool(url) as pool`` or ``await pool.open()``.
    """
    require_psycopg()
    from psycopg_pool import AsyncConnectionPool

    return AsyncConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        timeout=pool_timeout,
        open=False,
        kwargs=connect_kwargs(connect_timeout, statement_timeout),
    )


# SQLSTATE (or its two-letter class) -> what to check.
_ADVICE: dict[str, str] = {
    "57014": "a statement ran past statement_timeout: check the server's load and locks, "
    "or raise timeout=",
    "42501": "the role lacks a privilege on the invoicing_ tables: grant it, or run "
    "migrate as the tables' owner",
    "42P01": "the store's tables are missing: run migrate (invoicing-async db migrate)",
    "3D000": "the database does not exist: create it (CREATE DATABASE) or fix the URL",
    "28P01": "authentication failed: check the user and password of the URL",
    "28000": "the server refused this user or host: check pg_hba.conf and the URL's user",
    "53100": "the server's disk is full: free space and run again (nothing of this batch was kept)",
    "53300": "the server has too many connections: lower max_connections of the stores "
    "or share one pool",
    "25006": "the server is read-only (a standby?): point the URL at the primary",
    "40P01": "a deadlock with another writer: run again (nothing of this call was kept)",
    "40001": "a conflict with another writer: run again (nothing of this call was kept)",
    "55P03": "another session holds a lock on the invoicing_ tables: find it in pg_stat_activity",
    "57P01": "the server is shutting down: run again once it is back",
    "08": "the connection failed: check that the server is up, the URL's host and port, "
    "and the network",
    "53": "the server is out of resources (memory, disk, connections): check its logs",
}


def where_of(conninfo: str) -> str:
    """``postgresql://user@host:port/dbname`` of a URL or conninfo, without a password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(conninfo)
    except Exception:  # a malformed URL: the connection will say what is wrong
        return "PostgreSQL"
    host = str(parts.get("host") or parts.get("hostaddr") or "localhost")
    port = str(parts.get("port") or 5432)
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"postgresql://{user}{host}:{port}/{parts.get('dbname') or ''}"


def describe(exc: BaseException) -> str:
    """psycopg's message on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _advice(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "PoolTimeout":
        return (
            "no connection came free or could be made in time: check that the server is up "
            "and reachable, or raise max_connections / pool_timeout"
        )
    if name == "PoolClosed":
        return "the connection pool is closed or was never opened: open it (await pool.open())"
    state = getattr(exc, "sqlstate", None) or ""
    for key in (state, state[:2]):
        if key in _ADVICE:
            return _ADVICE[key]
    if name == "OperationalError":  # no SQLSTATE: the connection itself failed
        return _ADVICE["08"]
    return "see the PostgreSQL message"


def error_for(doing: str, where: str, exc: BaseException) -> StoreError:
    """A `StoreError` naming the database, psycopg's cause and what to check."""
    return StoreError(f"{doing} {where}: {describe(exc)} ({_advice(exc)})")


class BoundedCalls:
    """Store calls bounded in time on the client side, psycopg's errors as `StoreError`.

    A stopped server answers nothing, not even its own statement_timeout, and psycopg
    may take seconds more to give up on a cancelled query: a call past `timeout` raises
    at once, and its work is left to end in the background (`drain()` waits for it).
    """

    def __init__(self, timeout: float, where: str) -> None:
        self.timeout = timeout
        self._where = where
        self._stragglers: set[asyncio.Task[Any]] = set()

    async def run(self, work: Callable[[], Awaitable[T]], doing: str) -> T:
        """Run `work` within `timeout` seconds, its psycopg errors as `StoreError`.

        On timeout the work is cancelled but not awaited: psycopg may take seconds more to
        give up on a server that does not answer, and the caller should not wait for that.
        """
        import psycopg

        task = asyncio.ensure_future(work())
        try:
            done, _ = await asyncio.wait({task}, timeout=self.timeout)
        except asyncio.CancelledError:
            self._abandon(task)
            raise
        if not done:
            self._abandon(task)
            landing = ""
            if doing.startswith(("cannot write", "cannot save")):
                landing = (
                    "; the write may still land once the server answers (running it again is safe)"
                )
            raise StoreError(
                f"{doing} {self._where}: no answer within {self.timeout:g}s (check that the "
                f"server is up and responsive, and its load; or raise timeout=){landing}"
            )
        try:
            return task.result()
        except psycopg.Error as exc:
            raise error_for(doing, self._where, exc) from exc

    def _abandon(self, task: asyncio.Task[Any]) -> None:
        task.cancel()
        self._stragglers.add(task)
        task.add_done_callback(self._straggler_done)

    def _straggler_done(self, task: asyncio.Task[Any]) -> None:
        self._stragglers.discard(task)
        error = None if task.cancelled() else task.exception()
        if error is not None:  # retrieved, so asyncio does not log it as never retrieved
            logger.debug("abandoned store call ended: %s", describe(error))

    async def drain(self, timeout: float = 15.0) -> None:
        """Wait (a bounded time) for abandoned calls to end, before closing the pool."""
        if self._stragglers:
            await asyncio.wait(set(self._stragglers), timeout=timeout)
