"""The hourly budget under virtual time (tests/virtual_time.py): hours pass in milliseconds."""

from __future__ import annotations

import asyncio
import bisect
import random
from typing import Any

import pytest

import invoicing_async as ia
from invoicing_async._budget.budget import RateBudget, spender_of
from invoicing_async._budget.ledger import Grant
from invoicing_async._budget.stores import MemoryBudgetStore
from invoicing_async.testing._ratelimit import RequestWindow, WindowRule
from tests.scripted import Reply, ScriptedAPI, Seen, scripted_client
from tests.virtual_time import run_virtual, virtual_time

HOUR = 3600.0


def max_in_any_window(times: list[float], window: float) -> int:
    """The most send times that fit in any half-open window of `window` seconds."""
    best = 0
    for i, start in enumerate(times):
        j = bisect.bisect_left(times, start + window)
        best = max(best, j - i)
    return best


async def spend(budget: RateBudget, **kwargs: Any) -> Grant:
    """Take a unit and settle it at once, as a request answered instantly would."""
    permit = await spender_of(budget).take(**kwargs)
    await spender_of(budget).settle(permit, limit=None, remaining=None)
    return permit


@virtual_time
async def test_a_fresh_budget_lends_the_whole_limit_at_once() -> None:
    budget = RateBudget(limit=350, period=HOUR)
    loop = asyncio.get_running_loop()
    start = loop.time()
    for _ in range(350):
        await spend(budget, max_wait=0)
    assert loop.time() == start  # no waiting at all
    with pytest.raises(ia.RateLimitExceeded) as info:
        await spender_of(budget).take(max_wait=60)
    # The first unit comes back one period after its response.
    assert info.value.retry_after == pytest.approx(HOUR, abs=0.01)
    assert budget.snapshot().remaining == 0
    assert budget.snapshot().used_in_period == 350


@virtual_time
async def test_as_fast_as_possible_never_exceeds_the_limit_and_uses_98_percent() -> None:
    """Requests spend a random 0-2 s in flight; the server counts them on arrival."""
    budget = RateBudget(limit=350, period=HOUR)
    loop = asyncio.get_running_loop()
    start = loop.time()
    arrivals: list[float] = []
    rng = random.Random(4)

    async def request() -> None:
        permit = await spender_of(budget).take(max_wait=None, hold=30.0)
        up, down = rng.uniform(0, 1.0), rng.uniform(0, 1.0)
        await asyncio.sleep(up)
        arrivals.append(loop.time() - start)
        await asyncio.sleep(down)
        await spender_of(budget).settle(permit, limit=350, remaining=None)

    async def caller() -> None:
        while loop.time() - start < 3 * HOUR:
            await request()

    await asyncio.gather(*(caller() for _ in range(20)))
    arrivals.sort()
    inside = [t for t in arrivals if t < 3 * HOUR]
    assert max_in_any_window(arrivals, HOUR) <= 350
    assert len(inside) >= 0.98 * 3 * 350


@virtual_time
async def test_a_request_never_answered_returns_its_unit_after_period_plus_hold() -> None:
    budget = RateBudget(limit=2, period=HOUR)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await spender_of(budget).take(max_wait=0, hold=60.0)  # never settled: the process "crashed"
    await spend(budget, max_wait=0)
    await spender_of(budget).take(max_wait=None)
    assert loop.time() - start == pytest.approx(HOUR, abs=0.01)  # the settled one
    await spender_of(budget).take(max_wait=None)
    assert loop.time() - start == pytest.approx(HOUR + 60.0, abs=0.01)  # period + hold


@virtual_time
async def test_a_request_that_never_left_gives_its_unit_back() -> None:
    budget = RateBudget(limit=1, period=HOUR)
    permit = await spender_of(budget).take(max_wait=0)
    await spender_of(budget).settle(permit, sent=False)
    await spender_of(budget).take(max_wait=0)  # at once


@virtual_time
async def test_server_remaining_caps_what_goes_out_and_more_hands_units_back() -> None:
    budget = RateBudget(limit=100, period=HOUR)
    permit = await spender_of(budget).take(max_wait=0)
    await spender_of(budget).settle(permit, limit=100, remaining=2)  # someone else spent 97
    assert budget.available_now() == 2
    snap = budget.snapshot()
    assert (snap.used_in_period, snap.held_for_others, snap.server_remaining) == (1, 97, 2)
    await asyncio.sleep(1.0)  # (requests taken in one instant are assumed uncounted)
    first = await spender_of(budget).take(max_wait=0)
    await asyncio.sleep(1.0)
    await spender_of(budget).take(max_wait=0)
    with pytest.raises(ia.RateLimitExceeded):
        await spender_of(budget).take(max_wait=0)
    # The server then says 50 are left after `first` (one newer request not yet counted).
    await spender_of(budget).settle(first, limit=100, remaining=50)
    assert budget.available_now() == 49


@virtual_time
async def test_a_stale_answer_does_not_undo_newer_ones() -> None:
    budget = RateBudget(limit=10, period=HOUR)
    old = await spender_of(budget).take(max_wait=0)
    await asyncio.sleep(1.0)
    for _ in range(3):
        await spend(budget, max_wait=0)
    # The slow answer to the oldest request says 9 left: the 3 newer ones were not
    # counted in it yet, so 6 are free, as the ledger already says (10 - 4).
    await spender_of(budget).settle(old, limit=10, remaining=9)
    assert budget.available_now() == 6


@virtual_time
async def test_answers_counted_out_of_taking_order_hold_back_no_unit() -> None:
    """Four requests reach the server newest first and are answered in that order: a
    newer request whose answer showed more remaining was counted before the older one, so
    the older answer holds nothing back for it, and the whole limit goes out."""
    loop = asyncio.get_running_loop()
    window = RequestWindow(loop.time, limit=8, period=HOUR)
    hooks = spender_of(budget := RateBudget(limit=8, period=HOUR))
    permits = []
    for _ in range(4):
        permits.append(await hooks.take(max_wait=0))
        await asyncio.sleep(0.1)
    for permit in reversed(permits):
        assert window.take()
        await hooks.settle(permit, limit=8, remaining=window.remaining)
    snap = budget.snapshot()
    assert (snap.remaining, snap.used_in_period, snap.held_for_others) == (4, 4, 0)
    for _ in range(4):
        permit = await hooks.take(max_wait=0)
        assert window.take()  # the server never refuses
        await hooks.settle(permit, limit=8, remaining=window.remaining)
    assert window.used == 8
    with pytest.raises(ia.RateLimitExceeded):
        await hooks.take(max_wait=0)


@virtual_time
async def test_a_refusal_stops_every_user_and_one_probe_goes_after_the_estimate() -> None:
    store = MemoryBudgetStore()
    web, batch = RateBudget(limit=350, store=store), RateBudget(limit=350, store=store)
    loop = asyncio.get_running_loop()
    permit = await spender_of(batch).take(max_wait=0)
    wait = await spender_of(batch).settle(permit, refused=True)
    assert wait is not None
    assert HOUR - 1 <= wait <= HOUR + 1  # our one request leaves the window in an hour
    with pytest.raises(ia.RateLimitExceeded):
        await spender_of(web).take(max_wait=0)  # the other user of the budget stops too
    start = loop.time()
    probe = await spender_of(web).take(max_wait=None)
    assert loop.time() - start == pytest.approx(wait, abs=0.01)
    with pytest.raises(ia.RateLimitExceeded):
        await spender_of(batch).take(max_wait=0)  # exactly one probe
    await spender_of(web).settle(probe, limit=350, remaining=349)
    assert batch.available_now() == 349  # the probe's answer hands the rest back


@virtual_time
async def test_a_refusal_with_nothing_of_ours_out_probes_after_a_period() -> None:
    budget = RateBudget(limit=5, period=HOUR)
    permit = await spender_of(budget).take(max_wait=0)
    await spender_of(budget).settle(permit, sent=False)
    other = await spender_of(budget).take(max_wait=0)
    await spender_of(budget).settle(other, refused=True)
    assert budget.available_now() == 0
    assert budget.snapshot().refill_in == pytest.approx(HOUR, abs=0.01)


@virtual_time
async def test_background_work_leaves_the_reserve_to_interactive_calls() -> None:
    budget = RateBudget(limit=10, period=HOUR, reserve=3)
    for _ in range(7):
        await spend(budget, max_wait=0, background=True)
    with pytest.raises(ia.RateLimitExceeded, match="reserve"):
        await spender_of(budget).take(max_wait=0, background=True)
    assert budget.available_now(background=True) == 0
    for _ in range(3):
        await spend(budget, max_wait=0)  # interactive calls still go
    with pytest.raises(ia.RateLimitExceeded):
        await spender_of(budget).take(max_wait=0)


@virtual_time
async def test_time_for_estimates_follow_the_units_coming_back() -> None:
    budget = RateBudget(limit=10, period=HOUR)
    assert budget.time_for(10) == 0.0
    for _ in range(10):
        await spend(budget, max_wait=0)
    assert budget.time_for(1) == pytest.approx(HOUR, abs=0.01)
    assert budget.time_for(25) == pytest.approx(3 * HOUR, abs=0.01)


async def test_pace_spaces_requests_out() -> None:
    """`pace` (aiolimiter) is the one timing the ledger does not do: 100 per second."""
    budget = RateBudget(limit=1000, pace=100.0)
    loop = asyncio.get_running_loop()
    start = loop.time()
    for _ in range(11):
        await spend(budget, max_wait=0)
    assert loop.time() - start >= 0.09


def test_invalid_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        RateBudget(limit=0)
    with pytest.raises(ValueError, match="reserve"):
        RateBudget(limit=10, reserve=10)
    with pytest.raises(ValueError, match="period"):
        RateBudget(period=0)
    with pytest.raises(ValueError, match="pace"):
        RateBudget(pace=0)
    with pytest.raises(ia.ConfigurationError, match="sqlite"):
        RateBudget(shared="mysql://host/db")


def test_a_client_as_fast_as_it_can_stays_within_the_hourly_limit() -> None:
    """The whole client (real sockets to a loopback server) over 3 virtual hours."""

    async def scenario() -> None:
        sent: list[float] = []
        async with ScriptedAPI() as server:
            loop = asyncio.get_running_loop()
            start = loop.time()

            def answer(_seen: Seen) -> Reply:
                sent.append(loop.time() - start)
                return 200, b"<user><id type='integer'>1</id></user>", {}

            server.script("GET", "/api/v1.0/current_session.xml", answer, times=2000)
            async with scripted_client(server, budget=RateBudget(), max_wait=None) as client:
                while loop.time() - start < 3 * HOUR:
                    await client.current_session()
        inside = [t for t in sent if t < 3 * HOUR]
        assert max_in_any_window(inside, HOUR) <= 350
        assert len(inside) >= 0.98 * 3 * 350

    virtual_time(scenario)()


@pytest.mark.parametrize("rule", ["fixed", "sliding"])
def test_a_burst_on_one_timestamp_uses_the_whole_hour(rule: WindowRule) -> None:
    """Under a coarse clock every request of a burst has the same take time: those count as
    counted before the one settled, or the server's remaining would hold half the hour."""

    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        window = RequestWindow(loop.time, limit=350, period=HOUR, rule=rule)
        hooks = spender_of(RateBudget(limit=350, period=HOUR))
        start = loop.time()
        sent = 0
        while True:
            permit = await hooks.take(max_wait=None)
            if loop.time() - start >= 3 * HOUR:
                return sent
            if window.take():  # answered at once: no time passes within a burst
                sent += 1
                await hooks.settle(permit, limit=350, remaining=window.remaining)
            else:
                await hooks.settle(permit, refused=True)

    assert run_virtual(scenario) == 3 * 350


async def test_phantoms_are_one_counted_block_not_one_entry_each() -> None:
    """A 100,000 budget told by the server that 349 of 350 are left: 99,650 phantoms
    held as one block (count and return time), beside our one unit."""
    store = MemoryBudgetStore()
    budget = RateBudget(limit=100_000, period=HOUR, store=store)
    permit = await spender_of(budget).take(max_wait=0)
    await spender_of(budget).settle(permit, limit=350, remaining=349)
    ledger = store.ledger("default", budget)
    assert (len(ledger.units), ledger.phantoms, len(ledger.blocks)) == (1, 99_650, 1)
    assert budget.available_now() == 349
    # The server hands back 100 of them: still one block, smaller.
    permit = await spender_of(budget).take(max_wait=0)
    await spender_of(budget).settle(permit, limit=350, remaining=448)
    assert (len(ledger.units), ledger.phantoms, len(ledger.blocks)) == (2, 99_550, 1)
