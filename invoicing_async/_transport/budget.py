"""The hourly request budget of one account: a client-side token bucket that also obeys
what the server says is left.

The bucket is an aiolimiter `AsyncLimiter` configured so that no window of `period`
seconds ever holds more than `limit` requests: a burst of `burst` requests, then a
steady refill of (limit - burst) per period. (`AsyncLimiter(350, 3600)` would allow
350 at once and 350 more over the hour: ~700 in the first hour.)

On top of that, every response's `X-RateLimit-Remaining` caps what may still go out,
because other processes may spend the same account's budget.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Callable

import attrs
from aiolimiter import AsyncLimiter

from invoicing_async.errors import RateLimitExceeded

__all__ = ["BudgetSnapshot", "RateBudget"]

# Seconds added to each computed refill wait, so the bucket surely has room on waking.
_WAKE_MARGIN = 0.001


@attrs.frozen
class BudgetSnapshot:
    """What the budget looks like now, for progress displays and planning.

    `remaining`: requests that may go out in the current window, by the stricter of the
    client's count and the server's last word. `refill_in`: estimated seconds until the
    next request can go without waiting (0 when one can go now).
    """

    limit: int
    period: float
    remaining: int
    used_in_period: int
    server_limit: int | None
    server_remaining: int | None
    refill_in: float


class RateBudget:
    """The request budget of one account; share one instance between its clients.

    `limit` requests per `period` seconds (350 per hour by default). `burst` is how many
    may go back to back before the steady pace starts; the steady pace is
    (limit - burst) / period, so the total in any window never exceeds `limit`.
    """

    def __init__(
        self,
        limit: int = 350,
        period: float = 3600.0,
        *,
        burst: int | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if limit < 2:
            raise ValueError("limit must be at least 2")
        if period <= 0:
            raise ValueError("period must be positive")
        if burst is None:
            burst = max(1, limit // 35)
        if not 1 <= burst < limit:
            raise ValueError("burst must be at least 1 and less than limit")
        self.limit = limit
        self.period = period
        self.burst = burst
        self._clock = clock
        self._rate = (limit - burst) / period
        self._limiter = AsyncLimiter(burst, burst / self._rate)
        self._sent_times: collections.deque[float] = collections.deque()
        self._sent = 0  # sequence number of the last request let through
        self._waiting = 0
        self._server_limit: int | None = None
        self._server_remaining: int | None = None
        self._server_seq = 0
        self._server_blocked_until: float | None = None

    def __repr__(self) -> str:
        s = self.snapshot()
        return (
            f"RateBudget(limit={self.limit}, period={self.period}, burst={self.burst}, "
            f"remaining={s.remaining}, server_remaining={s.server_remaining})"
        )

    def _now(self) -> float:
        if self._clock is not None:
            return self._clock()
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    def _forget_old(self, now: float) -> None:
        cutoff = now - self.period
        sent = self._sent_times
        while sent and sent[0] <= cutoff:
            sent.popleft()

    def _server_available(self) -> int | None:
        if self._server_remaining is None:
            return None
        return self._server_remaining - (self._sent - self._server_seq)

    def _level(self) -> float:
        """The bucket's fill, drained up to now (aiolimiter keeps it in `_level`)."""
        limiter = self._limiter
        # Drains the bucket for the time passed; without a running loop (a repr in a
        # notebook cell) the last known level is the best there is.
        with contextlib.suppress(RuntimeError):
            limiter.has_capacity()
        level: float = getattr(limiter, "_level", float(limiter.max_rate))
        return level

    def _local_wait(self) -> float:
        """Seconds until the bucket lets one more request through (behind those queued)."""
        excess = self._level() + 1 + self._waiting - self._limiter.max_rate
        return max(0.0, excess / self._rate)

    def _server_wait(self, now: float) -> float:
        """Seconds until the server's window has room, when it said none is left."""
        available = self._server_available()
        if available is None or available > 0:
            return 0.0
        if self._server_blocked_until is None:
            self._forget_old(now)
            # Without a reset header the best guess is: our oldest request in the window
            # leaves it. With none of ours in it, someone else spent it: a whole period.
            oldest = self._sent_times[0] if self._sent_times else now
            self._server_blocked_until = oldest + self.period
        wait = self._server_blocked_until - now
        if wait <= 0:
            # The estimated reset has passed: let exactly one request go out to learn what
            # is left (its response's X-RateLimit-Remaining decides what follows).
            self._server_remaining = 1
            self._server_seq = self._sent
            self._server_blocked_until = None
            return 0.0
        return wait

    def estimate_wait(self) -> float:
        """Seconds a request asked for now would wait for budget."""
        now = self._now()
        return max(self._local_wait(), self._server_wait(now))

    async def acquire(self, *, max_wait: float | None = None) -> int:
        """Wait for room for one request and take it; returns its sequence number.

        Raises `RateLimitExceeded` at once (without sleeping) when the wait would be
        longer than `max_wait` seconds; `None` waits as long as it takes.
        """
        deadline = None if max_wait is None else self._now() + max_wait
        while True:
            server_wait = self._server_wait(self._now())
            if server_wait > 0:
                self._check_wait(server_wait, self._left(deadline))
                await asyncio.sleep(server_wait)
                continue  # the wait is over: the next look lets one request find out
            self._check_wait(self._local_wait(), self._left(deadline))
            self._waiting += 1
            try:
                await self._take_token()
            finally:
                self._waiting -= 1
            # From here to the return nothing awaits: checking the server's word and
            # counting this request happen as one step for concurrent callers.
            available = self._server_available()
            if available is None or available > 0:
                break
            # The server's window filled while we waited for a token (other callers, or
            # other programs): the token is spent, wait for the server as well.
        self._sent += 1
        now = self._now()
        self._sent_times.append(now)
        self._forget_old(now)
        return self._sent

    def _left(self, deadline: float | None) -> float | None:
        return None if deadline is None else max(0.0, deadline - self._now())

    async def _take_token(self) -> None:
        """Take one token from the bucket, sleeping until it has one.

        We sleep ourselves (a hair past the moment the bucket has room) and then take the
        token without yielding, rather than queueing inside aiolimiter: its wake-up timers
        can land a rounding error short of the refill and spin on a virtual clock.
        """
        limiter = self._limiter
        while not limiter.has_capacity():
            needed = max(0.0, self._level() + 1 - limiter.max_rate) / self._rate
            await asyncio.sleep(needed + _WAKE_MARGIN)
        await limiter.acquire()  # has capacity: returns without waiting

    def _check_wait(self, wait: float, max_wait: float | None) -> None:
        if max_wait is not None and wait > max_wait + 1e-9:
            raise RateLimitExceeded(
                f"request budget spent: next request possible in ~{wait:.0f}s, "
                f"more than max_wait={max_wait:g}s",
                retry_after=wait,
            )

    def observe(self, seq: int, *, limit: int | None, remaining: int | None) -> None:
        """Record the rate headers of the response to request `seq`."""
        if limit is not None:
            self._server_limit = limit
        if remaining is None or seq < self._server_seq:
            return
        self._server_seq = seq
        self._server_remaining = max(0, remaining)
        if remaining > 0:
            self._server_blocked_until = None

    def exhausted(self, seq: int) -> float:
        """The server refused request `seq` for the budget; returns the estimated wait."""
        self.observe(seq, limit=None, remaining=0)
        self._server_seq = max(self._server_seq, self._sent)
        self._server_remaining = 0
        return self._server_wait(self._now())

    def snapshot(self) -> BudgetSnapshot:
        now = self._now()
        self._forget_old(now)
        used = len(self._sent_times)
        remaining = max(0, self.limit - used)
        server = self._server_available()
        if server is not None:
            remaining = min(remaining, max(0, server))
        return BudgetSnapshot(
            limit=self.limit,
            period=self.period,
            remaining=remaining,
            used_in_period=used,
            server_limit=self._server_limit,
            server_remaining=None if server is None else max(0, server),
            refill_in=max(self._local_wait(), self._server_wait(now)),
        )

    def available_now(self) -> int:
        """How many requests could go out now without waiting on the bucket or the server."""
        local = int(self._limiter.max_rate - self._level() + 1e-9) - self._waiting
        server = self._server_available()
        if server is not None:
            local = min(local, server)
        return max(0, local)

    def time_for(self, requests: int) -> float:
        """Estimated seconds until `requests` more requests have gone out at full pace."""
        extra = max(0, requests - self.available_now())
        return extra / self._rate + (self._server_wait(self._now()) if extra else 0.0)
