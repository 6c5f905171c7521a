"""The one way to open PostgreSQL connections: psycopg imported lazily, a pool with its
timeouts that fails fast when it opens (`pool.Pool`), and psycopg's errors as `StoreError`s
that say where, what happened and what to check.

Importing this module imports nothing of psycopg (the `[postgres]` extra is optional);
errors are told apart by SQLSTATE, class name and, for a refused connection (which has no
SQLSTATE), the server's message; a URL's password never reaches a message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from invoicing_async._extras import install_hint
from invoicing_async.errors import ConfigurationError, StoreError

if TYPE_CHECKING:
    from invoicing_async._postgres.pool import Pool

logger = logging.getLogger("invoicing_async.postgres")

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

#: The `application_name` of our connections, as pg_stat_activity shows them.
APPLICATION_NAME = "invoicing-async"


def require_psycopg(what: str = "PostgreSQL support") -> None:
    """Raise `ConfigurationError` naming the extra when psycopg is not installed."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise ConfigurationError(f"{what} needs psycopg; {install_hint('postgres')}") from None


def connect_kwargs(
    connect_timeout: float, statement_timeout: float, application_name: str = APPLICATION_NAME
) -> dict[str, Any]:
    """Settings of our connections: the timeouts and the name the server shows.

    Not autocommit: pools set it when they make a connection (`_autocommit`), since
    procrastinate passes ``autocommit=True`` itself beside these when it connects.
    """
    return {
        # libpq takes whole seconds, and treats 1 as 2.
        "connect_timeout": max(2, round(connect_timeout)),
        "options": f"-c statement_timeout={int(statement_timeout * 1000)}",
        "application_name": application_name,
    }


async def _autocommit(conn: Any) -> None:
    """Each statement its own transaction unless a call opens one."""
    await conn.set_autocommit(True)


def connection_pool(
    url: str,
    *,
    max_size: int = 10,
    connect_timeout: float = 5.0,
    statement_timeout: float = 24.0,
    pool_timeout: float = 10.0,
    application_name: str = APPLICATION_NAME,
) -> Pool:
    """A pool (not opened yet) of autocommit connections with these timeouts: the one way
    this package connects to PostgreSQL.

    Share it between stores, the budget and procrastinate; open it with
    ``async with connection_pool(url) as pool`` or ``await pool.open()``, which fails
    within 3 s with the server's reason when the URL, role or database is wrong.
    """
    require_psycopg()
    from invoicing_async._postgres.pool import Pool

    return Pool(
        url,
        min_size=1,
        max_size=max_size,
        timeout=pool_timeout,
        open=False,
        kwargs=connect_kwargs(connect_timeout, statement_timeout, application_name),
        configure=_autocommit,
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
    "28000": "the server refused this user or host: check the URL's user (does the role "
    "exist?) and pg_hba.conf",
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
    """psycopg's message on one line; for a refused connection, the server's reason first."""
    text = " ".join(str(exc).split())
    if getattr(exc, "sqlstate", None) is None and " failed: " in text:
        # 'connection failed: connection to server at "h", port 5432 failed: FATAL: ...'
        return text.rsplit(" failed: ", 1)[1].removeprefix("FATAL: ")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# A refused connection has no SQLSTATE: the server's words -> the SQLSTATE they mean.
_REFUSALS = (
    ("FATAL: role ", "28000"),
    ("FATAL: database ", "3D000"),
    ("password authentication failed", "28P01"),
    ("no pg_hba.conf entry", "28000"),
)


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
    if not state and name == "OperationalError":
        text = " ".join(str(exc).split())
        for words, meaning in _REFUSALS:
            if words in text:
                return _ADVICE[meaning]
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
