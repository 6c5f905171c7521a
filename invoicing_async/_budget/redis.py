"""A budget shared by processes on many machines through Redis: the ledger's rule runs in
one Lua script (``lua/budget.lua``), atomic and timed by the server's `TIME`; an idle
budget's keys expire."""

from __future__ import annotations

from importlib import resources
from typing import Any

from invoicing_async._budget.ledger import Grant, LedgerParams, LedgerView, Refusal, new_unit_id
from invoicing_async._budget.stores import Turns, keep_inherited, renew_after_fork
from invoicing_async._extras import install_hint
from invoicing_async.errors import BudgetUnavailableError, ConfigurationError

__all__ = ["RedisBudgetStore"]


_SCRIPT = (resources.files("invoicing_async._budget") / "lua" / "budget.lua").read_text("utf-8")


class RedisBudgetStore:
    """The ledger of every key in one Redis database (needs the `[redis]` extra)."""

    shared = True
    turns: Turns

    def __init__(self, url: str, *, timeout: float = 5.0, max_connections: int = 8) -> None:
        try:
            import redis.asyncio  # noqa: F401 - checked here, used by `_connect`
        except ImportError:
            raise ConfigurationError(
                f"a redis:// shared budget needs redis-py; {install_hint('redis')}"
            ) from None
        self._url = url
        self._timeout = timeout
        self._max_connections = max_connections
        self._connect()
        renew_after_fork(self)

    def _connect(self) -> None:
        """A client over a pool that connects on first use."""
        import redis.asyncio as aioredis

        # A burst of callers waits its turn (`turns`, untimed while the server answers) for
        # one of a few connections instead of opening one each or failing past a cap.
        pool = aioredis.BlockingConnectionPool.from_url(
            self._url,
            max_connections=self._max_connections,
            timeout=self._timeout,
            socket_timeout=self._timeout,
            socket_connect_timeout=self._timeout,
        )
        self._redis: Any = aioredis.Redis.from_pool(pool)
        self.turns = Turns(self._max_connections, self._timeout)
        self._script = self._redis.register_script(_SCRIPT)

    def _after_fork(self) -> None:
        """In a forked child: connections of its own (two processes on one socket would
        read each other's replies); the parent's are kept, never used or closed."""
        keep_inherited(self._redis)
        self._connect()

    async def _run(self, key: str, args: list[Any]) -> list[Any]:
        tag = "{invoicing:budget:" + key + "}"
        keys = [tag + ":units", tag + ":taken", tag + ":blocks", tag + ":sizes", tag + ":heard"]
        try:
            reply: list[Any] = await self._script(keys=keys, args=args)
        except Exception as exc:
            raise BudgetUnavailableError(f"Redis failed: {type(exc).__name__}: {exc}") from exc
        return reply

    @staticmethod
    def _view(params: LedgerParams, tail: list[Any]) -> LedgerView:
        in_use, phantoms, next_in = tail
        next_at = float(next_in) if next_in not in (b"", "") else None
        return LedgerView(params.limit, int(in_use), int(phantoms), next_at)

    async def take(
        self, key: str, params: LedgerParams, *, hold: float, keep: int
    ) -> tuple[Grant | Refusal, LedgerView]:
        unit = new_unit_id()
        reply = await self._run(key, ["take", params.limit, params.period, hold, keep, unit])
        granted, taken_at, wait = int(reply[0]), float(reply[1]), float(reply[2])
        view = self._view(params, reply[3:])
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
        args = ["settle", params.limit, params.period, unit, repr(taken_at), "1" if sent else "0"]
        args.append("" if remaining is None else str(remaining))
        return self._view(params, await self._run(key, args))

    async def view(self, key: str, params: LedgerParams) -> LedgerView:
        # Settling an unknown unit with no news forgets what came back and changes nothing.
        return await self.settle(key, params, "-", 0.0, sent=True, remaining=None)

    async def close(self) -> None:
        await self._redis.aclose()
