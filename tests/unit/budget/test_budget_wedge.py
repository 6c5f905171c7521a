"""The budget after the server said "0 left": it must not wedge for good.

Simulated hours on a virtual-time loop: callers that fail fast (`max_wait=0`) and sleep the
`retry_after` they are given, against the service's fixed and sliding windows, with one
client or two clients (separate budgets) on one account. Once the estimated reset has
passed, a request goes out to learn what is left.
"""

from __future__ import annotations

import asyncio

import pytest

import invoicing_async as ia
from invoicing_async._budget.budget import spender_of
from invoicing_async.testing._ratelimit import RequestWindow, WindowRule
from tests.virtual_time import run_virtual

HOURS = 8
HOUR = 3600.0


async def program(
    budget: ia.RateBudget, window: RequestWindow, sent: list[float], until: float
) -> list[float | None]:
    """A request a minute, failing fast when the budget says no and sleeping as told."""
    loop = asyncio.get_running_loop()
    waits: list[float | None] = []
    while loop.time() < until:
        try:
            permit = await spender_of(budget).take(max_wait=0)
        except ia.RateLimitExceeded as exc:
            waits.append(exc.retry_after)
            await asyncio.sleep(max(exc.retry_after or 60.0, 1.0))
            continue
        if window.take():
            sent.append(loop.time())
            await spender_of(budget).settle(permit, limit=window.limit, remaining=window.remaining)
        else:
            await spender_of(budget).settle(permit, refused=True)
        await asyncio.sleep(60.0)
    return waits


async def simulate(rule: WindowRule, clients: int) -> tuple[list[int], list[float | None]]:
    loop = asyncio.get_running_loop()
    window = RequestWindow(loop.time, limit=5, period=HOUR, rule=rule)
    start = loop.time()
    sent: list[float] = []
    budgets = [ia.RateBudget(limit=350, period=HOUR) for _ in range(clients)]
    waits = await asyncio.gather(*(program(b, window, sent, start + HOURS * HOUR) for b in budgets))
    per_hour = [
        sum(1 for t in sent if start + h * HOUR <= t < start + (h + 1) * HOUR) for h in range(HOURS)
    ]
    return per_hour, [w for each in waits for w in each]


@pytest.mark.parametrize("rule", ["fixed", "sliding"])
@pytest.mark.parametrize("clients", [1, 2])
def test_no_wedge_over_many_hours(rule: WindowRule, clients: int) -> None:
    per_hour, waits = run_virtual(lambda: simulate(rule, clients))
    # Every hour requests go out again (no wedge), and never more than the server allows.
    assert all(n >= 1 for n in per_hour), per_hour
    assert all(n <= 5 for n in per_hour[1:]) or rule == "fixed", per_hour
    assert sum(per_hour) >= HOURS * 5 * 0.6, per_hour
    # Each refusal said when to come back, and never later than an hour and a minute.
    assert waits
    assert all(w is not None and 0 < w <= HOUR + 61.0 for w in waits), max(waits, key=str)
