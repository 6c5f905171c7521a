"""The hourly budget under virtual time (looptime): hours pass in milliseconds."""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Awaitable, Callable
from typing import Any

import looptime
import pytest

import invoicing_async as ia
from invoicing_async._transport.budget import RateBudget
from tests.scripted import ScriptedServer, scripted_client

HOUR = 3600.0


def virtual_time(test: Callable[[], Awaitable[Any]]) -> Callable[[], None]:
    """Run an async test on its own looptime loop, whose clock jumps over every wait.

    An explicit loop rather than looptime's pytest plugin: it cannot mix with the loops
    of pytest-asyncio, and it is closed when the test ends.
    """

    def run() -> None:
        loop = looptime.new_event_loop()
        try:
            loop.run_until_complete(test())
        finally:
            loop.close()

    run.__name__ = test.__name__
    return run


def max_in_any_window(times: list[float], window: float) -> int:
    """The most send times that fit in any half-open window of `window` seconds."""
    best = 0
    for i, start in enumerate(times):
        j = bisect.bisect_left(times, start + window)
        best = max(best, j - i)
    return best


@virtual_time
async def test_fast_as_possible_never_exceeds_limit_in_any_hour_yet_uses_95_percent() -> None:
    budget = RateBudget(limit=350, period=HOUR)
    loop = asyncio.get_running_loop()
    start = loop.time()
    sent: list[float] = []
    while loop.time() - start < 3 * HOUR:
        await budget.acquire(max_wait=None)
        sent.append(loop.time() - start)
    sent = [t for t in sent if t < 3 * HOUR]
    assert max_in_any_window(sent, HOUR) <= 350
    # Three hours allow 3 * 350 requests; the bucket must use at least 95% of that.
    assert len(sent) >= 0.95 * 3 * 350
    # The naive AsyncLimiter(350, 3600) would have let ~700 through in the first hour.
    assert sum(1 for t in sent if t < HOUR) <= 350


@virtual_time
async def test_concurrent_callers_share_the_budget() -> None:
    budget = RateBudget(limit=350, period=HOUR)
    loop = asyncio.get_running_loop()
    start = loop.time()
    sent: list[float] = []

    async def worker() -> None:
        while loop.time() - start < 2 * HOUR:
            await budget.acquire(max_wait=None)
            sent.append(loop.time() - start)

    await asyncio.gather(*(worker() for _ in range(20)))
    sent.sort()
    assert max_in_any_window([t for t in sent if t < 2 * HOUR], HOUR) <= 350


@virtual_time
async def test_max_wait_raises_at_once_with_an_estimate() -> None:
    budget = RateBudget(limit=350, period=HOUR, burst=10)
    loop = asyncio.get_running_loop()
    for _ in range(10):
        await budget.acquire(max_wait=0)
    before = loop.time()
    with pytest.raises(ia.RateLimitExceeded) as info:
        await budget.acquire(max_wait=1.0)
    assert loop.time() == before  # did not sleep
    assert info.value.retry_after == pytest.approx(HOUR / 340, rel=0.01)
    # Waiting long enough is allowed and takes about one refill interval.
    await budget.acquire(max_wait=60.0)
    assert loop.time() - before == pytest.approx(HOUR / 340, rel=0.01)


@virtual_time
async def test_server_remaining_caps_what_goes_out() -> None:
    budget = RateBudget(limit=100_000, period=HOUR)
    seq = await budget.acquire(max_wait=0)
    budget.observe(seq, limit=350, remaining=2)
    assert budget.available_now() == 2
    await budget.acquire(max_wait=0)
    await budget.acquire(max_wait=0)
    with pytest.raises(ia.RateLimitExceeded):
        await budget.acquire(max_wait=0)
    snap = budget.snapshot()
    assert snap.remaining == 0
    assert snap.server_limit == 350
    assert snap.refill_in > 0


@virtual_time
async def test_after_the_server_window_passes_one_request_probes_again() -> None:
    budget = RateBudget(limit=350, period=HOUR)
    loop = asyncio.get_running_loop()
    seq = await budget.acquire(max_wait=0)
    wait = budget.exhausted(seq)
    assert 0 < wait <= HOUR
    start = loop.time()
    await budget.acquire(max_wait=None)
    assert loop.time() - start == pytest.approx(wait)


def test_invalid_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        RateBudget(limit=1)
    with pytest.raises(ValueError, match="burst"):
        RateBudget(limit=10, burst=10)
    with pytest.raises(ValueError, match="period"):
        RateBudget(period=0)


def test_default_burst_keeps_steady_pace_within_limit() -> None:
    budget = RateBudget()
    assert budget.burst == 10
    # The steady pace: (limit - burst) per period, so burst + pace * period == limit.
    assert budget.time_for(budget.available_now() + 34) == pytest.approx(34 * 3600 / 340)


def test_a_client_as_fast_as_it_can_stays_within_the_hourly_limit() -> None:
    """The whole client (real sockets to a loopback server) over 3 virtual hours."""

    async def scenario() -> None:
        sent: list[float] = []
        async with ScriptedServer() as server:
            loop = asyncio.get_running_loop()
            start = loop.time()

            def answer(request: object, body: bytes) -> tuple[int, bytes, dict[str, str]]:
                sent.append(loop.time() - start)
                return 200, b"<user><id type='integer'>1</id></user>", {}

            server.script("GET", "/api/v1.0/current_session.xml", answer, times=2000)
            async with scripted_client(server, budget=RateBudget(), max_wait=None) as client:
                while loop.time() - start < 3 * HOUR:
                    await client.current_session()
        inside = [t for t in sent if t < 3 * HOUR]
        assert max_in_any_window(inside, HOUR) <= 350
        assert len(inside) >= 0.95 * 3 * 350

    virtual_time(scenario)()
