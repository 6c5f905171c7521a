"""Client CPU per call of `client.invoices.get(id)` against the same request made with raw
aiohttp (+ `json.loads(parse_float=Decimal)`, or `xmltodict.parse` for XML), while the
budget's ledger holds 300, 3,000 and 30,000 units (issue #25's table).

The fake service runs in its own process, so only the client's CPU is counted
(`time.process_time`, user and system). 20 calls are in flight. Each round opens its
session, warms every connection (the TLS handshakes are not a per-call cost), collects
garbage and times `CALLS` calls; the raw side and the SDK run in turn, a warm-up pair
first and then `ROUNDS` timed pairs, and each side's figure is its median round.

python -m benchmarks.bench_percall [--quick] [--profile]
"""

from __future__ import annotations

import asyncio
import base64
import cProfile
import gc
import json
import pstats
import ssl
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal

import aiohttp
import xmltodict

import invoicing_async as ia
from benchmarks.common import Result, in_flight
from benchmarks.server import FakeServerProcess
from invoicing_async._budget.budget import spender_of
from invoicing_async._budget.ledger import Grant
from invoicing_async._budget.stores import MemoryBudgetStore

#: (units held when the round ends, the budget's limit per hour) as in issue #25.
CASES = [(300, 350), (3_000, 100_000), (30_000, 10_000_000)]
CALLS = 200  # timed per round and side
BATCH = 40  # calls timed on one side before the other side's turn
IN_FLIGHT = 20
WARM = 2 * IN_FLIGHT  # untimed calls first: every connection of the pool open
ROUNDS = 5
TARGET = 1.5  # the SDK within 1.5x of raw aiohttp + json.loads (the steering's ruling, issue 43)


def _prefilled_budget(limit: int, held: int) -> ia.RateBudget:
    """A budget whose ledger already holds `held` units, each spent a moment ago."""
    budget = ia.RateBudget(limit=limit, key="default")
    store = spender_of(budget).store  # a benchmark sets the ledger's state up directly
    assert isinstance(store, MemoryBudgetStore)
    ledger, now = store.ledger("default", budget), store.now()
    for _ in range(held):
        grant = ledger.take(now, hold=0.0)
        assert isinstance(grant, Grant)
        ledger.settle(now, grant.unit, grant.taken_at)
    return budget


async def _in_flight(count: int, call: Callable[[int], Awaitable[object]]) -> None:
    """`count` calls, IN_FLIGHT at a time."""
    await in_flight(count, call, IN_FLIGHT)


def _raw_get(
    session: aiohttp.ClientSession, server: FakeServerProcess, fmt: str
) -> Callable[[int], Awaitable[None]]:
    """The SDK's request made by hand: aiohttp, Basic auth, and the body parsed."""
    context = ssl.create_default_context(cafile=str(server.ca))
    accept = "application/json" if fmt == "json" else "application/xml"
    parse: Callable[[bytes], object] = (
        (lambda body: json.loads(body, parse_float=Decimal)) if fmt == "json" else xmltodict.parse
    )
    credentials = base64.b64encode(b"api-user:bench-pw").decode()
    headers = {"Accept": accept, "Authorization": f"Basic {credentials}"}

    async def get(i: int) -> None:
        url = f"{server.base_url}/api/v1.0/invoices/{1 + i % 50}.{fmt}"
        async with session.get(url, headers=headers, ssl=context) as resp:
            body = await resp.read()
            assert resp.status == 200, resp.status
            parse(body)

    return get


async def _cpu(calls: int, call: Callable[[int], Awaitable[object]], first: int) -> float:
    """Seconds of client CPU for `calls` calls numbered from `first`."""
    start = time.process_time()
    await _in_flight(calls, lambda i: call(first + i))
    return time.process_time() - start


async def _round(
    server: FakeServerProcess,
    fmt: str,
    limit: int,
    held: int,
    profiler: cProfile.Profile | None = None,
) -> tuple[float, float]:
    """µs of client CPU per call, (SDK, raw), over `CALLS` calls each, taken in batches
    of `BATCH` in turn so that a busy spell of the machine lands on both sides alike."""
    budget = _prefilled_budget(limit, held - WARM - CALLS)
    async with (
        server.client(format=fmt, budget=budget) as client,
        aiohttp.ClientSession() as session,
    ):
        raw = _raw_get(session, server, fmt)

        async def sdk(i: int) -> object:
            return await client.invoices.get(1 + i % 50)

        await _in_flight(WARM, raw)  # every connection of both pools open
        await _in_flight(WARM, sdk)
        gc.collect()  # what earlier rounds left is not collected on this one's time
        ours = theirs = 0.0
        for first in range(WARM, WARM + CALLS, BATCH):
            theirs += await _cpu(BATCH, raw, first)
            if profiler is not None:
                profiler.enable()
            ours += await _cpu(BATCH, sdk, first)
            if profiler is not None:
                profiler.disable()
    assert budget.snapshot().used_in_period == held, budget.snapshot()
    return ours / CALLS * 1e6, theirs / CALLS * 1e6


async def _case(
    server: FakeServerProcess, fmt: str, held: int, limit: int, rounds: int
) -> tuple[float, float]:
    await _round(server, fmt, limit, held)  # a warm-up round: first-use costs
    ours: list[float] = []
    raw: list[float] = []
    for _ in range(rounds):
        mine, theirs = await _round(server, fmt, limit, held)
        ours.append(mine)
        raw.append(theirs)
    return statistics.median(ours), statistics.median(raw)


async def _all(rounds: int) -> list[Result]:
    results = []
    async with FakeServerProcess(invoices=50) as server:
        for fmt in ("json", "xml"):
            for held, limit in CASES:
                ours, raw = await _case(server, fmt, held, limit, rounds)
                results.append(
                    Result(
                        name=f"percall, invoices.get, {fmt.upper()}, {held:,} units held "
                        f"(limit {limit:,}/h)",
                        ours=round(ours, 1),
                        baseline=round(raw, 1),
                        unit="µs",
                        target=TARGET,
                        informational=fmt == "xml",
                        note=f"raw aiohttp + "
                        f"{'json.loads(parse_float=Decimal)' if fmt == 'json' else 'xmltodict'}"
                        f"; {IN_FLIGHT} in flight, connections warm; median of {rounds} "
                        f"rounds of {CALLS} calls a side, in turns of {BATCH}",
                    )
                )
    return results


def run(rounds: int = ROUNDS) -> list[Result]:
    return asyncio.run(_all(rounds))


def _profile() -> None:
    """cProfile (CPU time) of the SDK's calls at 30,000 units held, JSON: top by own time."""

    async def main() -> None:
        profiler = cProfile.Profile(time.process_time)
        async with FakeServerProcess(invoices=50) as server:
            for _ in range(3):
                await _round(server, "json", 10_000_000, 30_000, profiler)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)

    asyncio.run(main())


if __name__ == "__main__":
    if "--profile" in sys.argv:
        _profile()
    else:
        from benchmarks.run import table

        print(table(run(rounds=1 if "--quick" in sys.argv else ROUNDS)))
