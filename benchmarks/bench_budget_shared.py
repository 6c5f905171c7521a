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
    default = [asyncio.run(_first_sync(ia.RateBudget())) for _ in range(3)]
    unlimited = [asyncio.run(_first_sync(ia.RateBudget(limit=10**9))) for _ in range(3)]
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


def run() -> list[Result]:
    return [fresh_budget_ratio(), *shared_results()]
