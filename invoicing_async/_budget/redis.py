"""A budget shared by processes on many machines through Redis.

The ledger's rule runs in two Lua scripts (``lua/``, package data), so taking a unit is
one round trip, atomic by Redis's design and timed by the server's `TIME`. A key's units
live in two sorted sets (by return time, and by take time for our own requests) under one
hash tag, with an expiry so an idle budget leaves nothing behind.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from invoicing_async._budget.ledger import Grant, LedgerView, Refusal, new_unit_id
from invoicing_async._budget.stores import LedgerParams
from invoicing_async._extras import install_hint
from invoicing_async.errors import BudgetUnavailableError, ConfigurationError

__all__ = ["RedisBudgetStore"]


def _script(name: str) -> str:
    """A budget script (``lua/<name>.lua``) behind the shared head (``lua/common.lua``)."""
    folder = resources.files("invoicing_async._budget") / "lua"
    return (folder / "common.lua").read_text("utf-8") + (folder / f"{name}.lua").read_text("utf-8")


class RedisBudgetStore:
    """The ledger of every key in one Redis database (needs the `[redis]` extra)."""

    shared = True

    def __init__(self, url: str, *, timeout: float = 5.0, max_connections: int = 8) -> None:
        try:
            import redis.asyncio as aioredis
        except ImportError:
            raise ConfigurationError(
                f"a redis:// shared budget needs redis-py; {install_hint('redis')}"
            ) from None
        # A burst of callers waits its turn for one of a few connections (within the
        # budget's store_timeout) instead of opening one each or failing past a cap.
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=timeout,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
        )
        self._redis: Any = aioredis.Redis.from_pool(pool)
        self._take = self._redis.register_script(_script("take"))
        self._settle = self._redis.register_script(_script("settle"))

    @staticmethod
    def _keys(key: str) -> list[str]:
        tag = "{invoicing:budget:" + key + "}"
        return [tag + ":units", tag + ":taken", tag + ":seq"]

    async def _run(self, script: Any, key: str, args: list[Any]) -> list[Any]:
        try:
            reply: list[Any] = await script(keys=self._keys(key), args=args)
        except Exception as exc:
            raise BudgetUnavailableError(f"Redis failed: {type(exc).__name__}: {exc}") from exc
        return reply

    @staticmethod
    def _view(params: LedgerParams, tail: list[Any]) -> LedgerView:
        phantoms = int(tail[0])
        returns = tuple(float(r) for r in tail[1:])
        return LedgerView(params.limit, len(returns), phantoms, returns)

    async def take(
        self, key: str, params: LedgerParams, *, hold: float, keep: int
    ) -> tuple[Grant | Refusal, LedgerView]:
        unit = new_unit_id()
        reply = await self._run(self._take, key, [params.limit, params.period, hold, keep, unit])
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
        args = [params.limit, params.period, unit, repr(taken_at), "1" if sent else "0"]
        args.append("" if remaining is None else str(remaining))
        return self._view(params, await self._run(self._settle, key, args))

    async def view(self, key: str, params: LedgerParams) -> LedgerView:
        # A settle of an unknown unit with no news: expires what came back, changes nothing.
        args = [params.limit, params.period, "-", "0", "1", ""]
        return self._view(params, await self._run(self._settle, key, args))

    async def close(self) -> None:
        await self._redis.aclose()
