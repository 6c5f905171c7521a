"""A budget shared by processes on many machines through Redis: the ledger's rule runs in
one Lua script (``lua/budget.lua``), atomic and timed by the server's `TIME`; an idle
budget's keys expire."""

from __future__ import annotations

from importlib import resources
from typing import Any

from invoicing_async._budget.ledger import Grant, LedgerParams, LedgerView, Refusal, new_unit_id
from invoicing_async._extras import install_hint
from invoicing_async.errors import BudgetUnavailableError, ConfigurationError

__all__ = ["RedisBudgetStore"]


_SCRIPT = (resources.files("invoicing_async._budget") / "lua" / "budget.lua").read_text("utf-8")


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
        self._script = self._redis.register_script(_SCRIPT)

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
