"""The one way to open PostgreSQL connections: psycopg imported lazily, a pool that fails
fast when it opens, and psycopg's errors as `StoreError`s that say where, what and what to
check (never a URL's password)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from invoicing_async._extras import install_hint
from invoicing_async._postgres.reasons import describe, error_for
from invoicing_async._text import package_logger
from invoicing_async.errors import ConfigurationError, StoreError

if TYPE_CHECKING:
    from invoicing_async._postgres.pool import Pool

logger = package_logger("invoicing_async.postgres")

T = TypeVar("T")

__all__ = ["BoundedCalls", "connection_pool", "require_psycopg"]

#: The `application_name` of our connections, as pg_stat_activity shows them.
APPLICATION_NAME = "invoicing-async"


def require_psycopg(what: str = "PostgreSQL support") -> None:
    """Raise `ConfigurationError` naming the extra when psycopg is not installed."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise ConfigurationError(f"{what} needs psycopg; {install_hint('postgres')}") from None


async def _autocommit(conn: Any) -> None:
    """Each statement its own transaction unless a call opens one (not a connect keyword:
    procrastinate connects with the pool's keywords and an `autocommit` of its own)."""
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
    """A pool (not opened yet) of autocommit connections with these timeouts, to share
    between stores, the budget and procrastinate; opening it fails within 3 s with the
    server's reason when the URL, role or database is wrong."""
    require_psycopg()
    from invoicing_async._postgres.pool import Pool

    return Pool(
        url,
        min_size=1,
        max_size=max_size,
        timeout=pool_timeout,
        open=False,
        kwargs={
            # libpq takes whole seconds, and treats 1 as 2.
            "connect_timeout": max(2, round(connect_timeout)),
            "options": f"-c statement_timeout={int(statement_timeout * 1000)}",
            "application_name": application_name,
        },
        configure=_autocommit,
    )


class BoundedCalls:
    """Store calls bounded in time on the client side (a stopped server answers nothing),
    psycopg's errors as `StoreError`; late work ends in the background (`drain()`)."""

    def __init__(self, timeout: float, where: str) -> None:
        self.timeout = timeout
        self._where = where
        self._stragglers: set[asyncio.Task[Any]] = set()

    async def run(self, work: Callable[[], Awaitable[T]], doing: str) -> T:
        """Run `work` within `timeout` seconds, its psycopg errors as `StoreError`; on timeout it
        is cancelled but not awaited."""
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
