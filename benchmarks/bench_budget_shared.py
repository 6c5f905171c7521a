"""The budget at full speed and shared.

(a) A fresh account's first sync of 3,000 invoices (31 requests): wall time with the
default `RateBudget()` over wall time with an unlimited one (target <= 1.2; the token
bucket of 0.2 took ~18x). (c) For each shared store, 3 processes x 20 callers spend
one budget (40 per 4 s) for 10 s against a loopback server counting on a sliding window:
busiest window at the server (<= the limit), 403s (0) and the store's round-trip latency
p50/p99 per take.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import invoicing_async as ia
from benchmarks.common import Result
from benchmarks.server import FakeServerProcess
from invoicing_async._budget.budget import spender_of
from invoicing_async._budget.ledger import Grant
from invoicing_async.sync import MemoryStore, SyncEngine
from invoicing_async.testing import FakeInvoicingService
from tests.servers import ServerUnavailable, start_postgres, start_redis
from tests.stress.budget.budget_child import run_children

ROOT = Path(__file__).parents[1]
INVOICES = 3000
LIMIT, PERIOD, SECONDS, PROCESSES, CALLERS = 40, 4.0, 10.0, 3, 20


async def _first_sync(budget: ia.RateBudget) -> float:
    async with (
        FakeServerProcess(invoices=INVOICES, latency=0.02) as server,
        server.client(format="json", budget=budget) as client,
    ):
        start = time.perf_counter()
        report = await SyncEngine(client, MemoryStore()).run()
        elapsed = time.perf_counter() - start
    assert report.created == INVOICES
    return elapsed


def fresh_budget_ratio() -> Result:
    default: list[float] = []
    unlimited: list[float] = []
    for _ in range(3):  # in turns, so that a busy spell of the machine lands on both
        default.append(asyncio.run(_first_sync(ia.RateBudget())))
        unlimited.append(asyncio.run(_first_sync(ia.RateBudget(limit=10**9))))
    ours, base = statistics.median(default), statistics.median(unlimited)
    return Result(
        "budget (a): first sync of 3,000 invoices, default budget / unlimited",
        ours,
        base,
        "s",
        1.2,
        note=f"median of 3: {ours:.2f}s vs {base:.2f}s (31 requests, all in the first burst)",
    )


async def _processes(service: FakeInvoicingService, shared: str) -> list[dict[str, Any]]:
    args = [service.base_url, service.username, service.password, shared, str(LIMIT)]
    args += [str(PERIOD), str(CALLERS), str(SECONDS)]
    return await run_children(args, PROCESSES, cwd=ROOT)


async def _shared(shared: str) -> tuple[int, int, int, list[float]]:
    async with FakeInvoicingService(
        tls=False, limit=LIMIT, period=PERIOD, window_rule="sliding"
    ) as service:
        results = await _processes(service, shared)
        answered = sorted(r.at for r in service.account.requests if r.status == 200)
        refused = service.account.counters["403"]
    busiest = max(
        (sum(1 for t in answered[i:] if t < start + PERIOD) for i, start in enumerate(answered)),
        default=0,
    )
    latencies = sorted(x for r in results for x in r["latencies"])
    return busiest, refused, len(answered), latencies


@contextlib.asynccontextmanager
async def _backend(name: str) -> AsyncIterator[str | None]:
    if name == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/budget.db"
        return
    try:
        if name == "postgres":
            with start_postgres() as pg:
                yield pg.url()
        else:
            with start_redis() as redis:
                yield redis.url()
    except ServerUnavailable:
        yield None


def shared_results() -> list[Result]:
    results = []
    for name in ("sqlite", "postgres", "redis"):

        async def one(backend: str = name) -> tuple[int, int, int, list[float]] | None:
            async with _backend(backend) as url:
                return None if url is None else await _shared(url)

        measured = asyncio.run(one())
        if measured is None:
            print(f"budget (c): {name} unavailable, skipped", file=sys.stderr)
            continue
        busiest, refused, answered, latencies = measured
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
        allowed = LIMIT * SECONDS / PERIOD
        results.append(
            Result(
                f"budget (c) {name}: busiest {PERIOD:g}s window at the server",
                busiest,
                LIMIT,
                "requests",
                1.0,
                note=f"{PROCESSES} processes x {CALLERS} callers, {answered} answered in "
                f"~{SECONDS:g}s ({allowed:.0f} allowed), {refused} 403s; take p50 {p50:.2f} ms, "
                f"p99 {p99:.2f} ms",
            )
        )
        results.append(
            Result(f"budget (c) {name}: 403s from the server", refused, 1, "responses", 0.0)
        )
        results.append(
            Result(
                f"budget (c) {name}: take latency p99",
                p99,
                p50,
                "ms",
                1.0,
                note=f"p50 {p50:.2f} ms, p99 {p99:.2f} ms over {len(latencies)} takes",
                informational=True,
            )
        )
    return results


HELD = (50, 5000)
CALLS, ROUNDS = 200, 5


async def _per_call(url: str) -> list[float]:
    """Seconds per take and settle on one store, for a key holding each of `HELD` units
    (each settled): both keys filled first, then timed in turns, each its median round."""
    budget = ia.RateBudget(max(HELD) + ROUNDS * CALLS + 10, 3600.0, shared=url, key="bench")
    store = spender_of(budget).store  # timing the store itself

    async def call(key: str) -> None:
        grant, _ = await store.take(key, budget, hold=60.0, keep=0)
        assert isinstance(grant, Grant)
        await store.settle(key, budget, grant.unit, grant.taken_at, sent=True, remaining=None)

    rounds: dict[int, list[float]] = {held: [] for held in HELD}
    try:
        for held in HELD:
            for _ in range(held):
                await call(f"held-{held}")
        for _ in range(ROUNDS):
            for held in HELD:
                started = time.perf_counter()
                for _ in range(CALLS):
                    await call(f"held-{held}")
                rounds[held].append((time.perf_counter() - started) / CALLS)
    finally:
        await budget.close()
    return [statistics.median(rounds[held]) for held in HELD]


async def _burst(url: str) -> tuple[int, float]:
    """1,000 concurrent calls through one budget (default store timeout): failures, seconds."""
    budget = ia.RateBudget(2000, 3600.0, shared=url, key="burst")
    spender = spender_of(budget)  # the transport's side, without HTTP

    async def call() -> None:
        permit = await spender.take(max_wait=0)
        await spender.settle(permit)

    started = time.perf_counter()
    results = await asyncio.gather(*(call() for _ in range(1000)), return_exceptions=True)
    elapsed = time.perf_counter() - started
    await budget.close()
    return sum(isinstance(r, BaseException) for r in results), elapsed


def store_cost_results() -> list[Result]:
    """(d) Each shared store's cost per take and settle at 50 and 5,000 units held (flat:
    at most 1.5x), and (e) 1,000 concurrent calls through one budget (none fails)."""
    results = []
    for name in ("sqlite", "postgres", "redis"):

        async def one(backend: str = name) -> tuple[list[float], tuple[int, float]] | None:
            async with _backend(backend) as url:
                if url is None:
                    return None
                return await _per_call(url), await _burst(url)

        measured = asyncio.run(one())
        if measured is None:
            print(f"budget (d): {name} unavailable, skipped", file=sys.stderr)
            continue
        (small, big), (failed, seconds) = measured
        results.append(
            Result(
                f"budget (d) {name}: take+settle at {HELD[1]:,} units held / at {HELD[0]}",
                big * 1000,
                small * 1000,
                "ms",
                1.5,
                note=f"{small * 1000:.3f} ms at {HELD[0]}, {big * 1000:.3f} ms at {HELD[1]:,}",
            )
        )
        results.append(
            Result(
                f"budget (e) {name}: failures in 1,000 concurrent calls",
                failed,
                1,
                "calls",
                0.0,
                note=f"{seconds:.2f}s for the burst",
            )
        )
    return results


def run() -> list[Result]:
    return [fresh_budget_ratio(), *shared_results(), *store_cost_results()]
