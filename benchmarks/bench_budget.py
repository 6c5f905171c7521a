"""The budget over a simulated 3-hour sync of 100,000 invoices, in virtual time: requests in
the busiest hour (<= 350), share of the allowance used (>= 95%), and 403s from the server."""

from __future__ import annotations

import asyncio
import bisect

import looptime

import invoicing_async as ia
from benchmarks.common import Result
from invoicing_async._sync.plan import batches_for

HOUR = 3600.0
HOURS = 3
INVOICES = 100_000


async def _simulate() -> tuple[int, int, int, float]:
    """A sync's fetch loop against a server that counts like the real one (sliding hour)."""
    budget = ia.RateBudget()  # 350 per hour, the default
    loop = asyncio.get_running_loop()
    start = loop.time()
    sent: list[float] = []
    refused = 0
    batches = 1 + batches_for(INVOICES)

    async def worker() -> None:
        nonlocal refused
        while len(sent) < batches and loop.time() - start < HOURS * HOUR:
            seq = await budget.acquire(max_wait=None)
            now = loop.time() - start
            if now >= HOURS * HOUR:
                return
            in_window = len(sent) - bisect.bisect_right(sent, now - HOUR)
            remaining = 350 - in_window
            if remaining <= 0:
                refused += 1
                budget.exhausted(seq)
                continue
            sent.append(now)
            budget.observe(seq, limit=350, remaining=remaining - 1)

    await asyncio.gather(*(worker() for _ in range(4)))
    busiest = max(bisect.bisect_left(sent, t + HOUR) - i for i, t in enumerate(sent)) if sent else 0
    return busiest, len(sent), refused, max(sent)


def run() -> list[Result]:
    loop = looptime.new_event_loop()
    try:
        busiest, total, refused, last = loop.run_until_complete(_simulate())
    finally:
        loop.close()
    # The sync needs 1,001 requests, done before the 3 hours are over: the share is taken
    # over the time it ran (350 an hour allowed).
    allowed = 350 * last / HOUR
    return [
        Result("budget: requests in the busiest hour", busiest, 350, "requests", 1.0),
        Result(
            "budget: share of the allowance used while syncing",
            total,
            allowed,
            "requests",
            0.95,
            higher_is_better=True,
            note=f"{total} requests in {last / HOUR:.2f} h, when {allowed:.0f} were allowed",
        ),
        Result("budget: 403s from the server", refused, 1, "responses", 0.0, note="must be 0"),
    ]
