"""A budget shared by processes on many machines through Redis.

The ledger's rule runs in two Lua scripts, so taking a unit is one round trip, atomic
by Redis's design and timed by the server's `TIME`. A key's units live in two sorted
sets (by return time, and by take time for our own requests) under one hash tag, with an
expiry so an idle budget leaves nothing behind.
"""

from __future__ import annotations

from typing import Any

from invoicing_async._budget.ledger import Grant, LedgerView, Refusal, new_unit_id
from invoicing_async._budget.stores import LedgerParams
from invoicing_async._extras import install_hint
from invoicing_async.errors import BudgetUnavailableError, ConfigurationError

__all__ = ["RedisBudgetStore"]

# Shared head of both scripts: the clock, expiry of units that came back, and the view.
_COMMON = """
pcall(redis.replicate_commands)
local units, taken, seq = KEYS[1], KEYS[2], KEYS[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local function expire()
  local gone = redis.call('ZRANGEBYSCORE', units, '-inf', now)
  for i = 1, #gone do redis.call('ZREM', taken, gone[i]) end
  redis.call('ZREMRANGEBYSCORE', units, '-inf', now)
end
local function view(head)
  local all = redis.call('ZRANGE', units, 0, -1, 'WITHSCORES')
  local out = head
  local phantoms = 0
  local returns = {}
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 1) == 'p' then phantoms = phantoms + 1 end
    returns[#returns + 1] = string.format('%.6f', tonumber(all[i + 1]) - now)
  end
  out[#out + 1] = phantoms
  for i = 1, #returns do out[#out + 1] = returns[i] end
  return out
end
local function keep_alive(period, hold)
  local ms = math.ceil((2 * period + hold) * 1000)
  redis.call('PEXPIRE', units, ms)
  redis.call('PEXPIRE', taken, ms)
  redis.call('PEXPIRE', seq, ms)
end
"""

_TAKE = (
    _COMMON
    + """
local limit, period, hold, keep = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4])
expire()
local in_use = redis.call('ZCARD', units)
local head
if limit - in_use > keep then
  redis.call('ZADD', units, now + period + hold, ARGV[5])
  redis.call('ZADD', taken, now, ARGV[5])
  head = {1, string.format('%.6f', now), '0'}
else
  local needed = in_use - (limit - keep - 1)
  local at = now + period
  local r = redis.call('ZRANGE', units, needed - 1, needed - 1, 'WITHSCORES')
  if r[2] then at = tonumber(r[2]) end
  head = {0, string.format('%.6f', now), string.format('%.6f', math.max(0, at - now))}
end
keep_alive(period, hold)
return view(head)
"""
)

_SETTLE = (
    _COMMON
    + """
local limit, period, unit = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local taken_at, sent, remaining = tonumber(ARGV[4]), ARGV[5] == '1', ARGV[6]
expire()
local function burn(count, at_first, at_rest)
  for i = 1, count do
    local id = 'p' .. redis.call('INCR', seq)
    if i == 1 then redis.call('ZADD', units, at_first, id)
    else redis.call('ZADD', units, at_rest, id) end
  end
end
if not sent then
  redis.call('ZREM', units, unit)
  redis.call('ZREM', taken, unit)
else
  local current = redis.call('ZSCORE', units, unit)
  if current and tonumber(current) > now + period then
    redis.call('ZADD', units, now + period, unit)
  end
  local own = redis.call('ZSCORE', taken, unit)
  if own then taken_at = tonumber(own) end
  if remaining ~= '' then
    local after = redis.call('ZCOUNT', taken, taken_at, '+inf')
    if own then after = after - 1 end
    local allowed = tonumber(remaining) - after
    local free = limit - redis.call('ZCARD', units)
    if free > allowed then
      local count = free - math.max(0, allowed)
      if allowed > 0 then
        burn(count, now + period, now + period)
      else
        local oldest = redis.call('ZRANGE', taken, 0, -1)
        local min_real = nil
        for i = 1, #oldest do
          local s = tonumber(redis.call('ZSCORE', units, oldest[i]))
          if s and (min_real == nil or s < min_real) then min_real = s end
        end
        if min_real then burn(count, min_real + period, min_real + period)
        else burn(count, now + period, now + 2 * period) end
      end
    elseif free < allowed then
      local all = redis.call('ZREVRANGE', units, 0, -1)
      local give = allowed - free
      for i = 1, #all do
        if give <= 0 then break end
        if string.sub(all[i], 1, 1) == 'p' then
          redis.call('ZREM', units, all[i])
          give = give - 1
        end
      end
    end
  end
end
keep_alive(period, 0)
return view({})
"""
)


class RedisBudgetStore:
    """The ledger of every key in one Redis database (needs the `[redis]` extra)."""

    shared = True

    def __init__(self, url: str, *, timeout: float = 5.0) -> None:
        try:
            import redis.asyncio as aioredis
        except ImportError:
            raise ConfigurationError(
                f"a redis:// shared budget needs redis-py; {install_hint('redis')}"
            ) from None
        self._redis: Any = aioredis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self._take = self._redis.register_script(_TAKE)
        self._settle = self._redis.register_script(_SETTLE)

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
