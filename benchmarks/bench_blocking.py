"""Client CPU per call of the blocking client's `invoices.get(id)` against the async
client's, each call made serially (one after the other), JSON (issue #45).

The fake service runs in its own process, so only the client's CPU is counted
(`time.process_time`: every thread of the process, the blocking client's loop thread
included). Both clients keep their connection warm; the sides run in turns of `BATCH`
calls, `CALLS` calls a side per round, and each side's figure is its median round.

python -m benchmarks.bench_blocking [--quick]
"""

from __future__ import annotations

import asyncio
import gc
import ssl
import statistics
import sys
import time

import invoicing_async as ia
from benchmarks.common import Result
from benchmarks.server import FakeServerProcess

CALLS = 3_000  # timed per round and side
BATCH = 300  # calls timed on one side before the other side's turn
WARM = 50
ROUNDS = 3
TARGET = 1.1  # the blocking call within 1.1x of the async call made serially


def _round(server: FakeServerProcess, loop: asyncio.AbstractEventLoop) -> tuple[float, float]:
    """µs of client CPU per call, (blocking, async), over `CALLS` calls each."""
    context = ssl.create_default_context(cafile=str(server.ca))
    auth = ia.BasicAuth("api-user", "bench-pw")
    blocking = ia.BlockingInvoicingClient(
        server.base_url, auth=auth, budget=ia.RateBudget(limit=10**9), format="json", ssl=context
    )
    client = ia.InvoicingClient(
        server.base_url, auth=auth, budget=ia.RateBudget(limit=10**9), format="json", ssl=context
    )

    async def serially(first: int, count: int) -> None:
        for i in range(first, first + count):
            await client.invoices.get(1 + i % 50)

    def blocking_serially(first: int, count: int) -> None:
        for i in range(first, first + count):
            blocking.invoices.get(1 + i % 50)

    with blocking:
        loop.run_until_complete(client.__aenter__())
        try:
            loop.run_until_complete(serially(0, WARM))
            blocking_serially(0, WARM)
            gc.collect()
            ours = theirs = 0.0
            for first in range(WARM, WARM + CALLS, BATCH):
                start = time.process_time()
                loop.run_until_complete(serially(first, BATCH))
                theirs += time.process_time() - start
                start = time.process_time()
                blocking_serially(first, BATCH)
                ours += time.process_time() - start
        finally:
            loop.run_until_complete(client.aclose())
    return ours / CALLS * 1e6, theirs / CALLS * 1e6


def run(rounds: int = ROUNDS) -> list[Result]:
    loop = asyncio.new_event_loop()
    server = FakeServerProcess(invoices=50)
    loop.run_until_complete(server.__aenter__())
    try:
        _round(server, loop)  # a warm-up round: first-use costs
        pairs = [_round(server, loop) for _ in range(rounds)]
    finally:
        loop.run_until_complete(server.__aexit__(None, None, None))
        loop.close()
    ours = statistics.median(p[0] for p in pairs)
    theirs = statistics.median(p[1] for p in pairs)
    return [
        Result(
            name="blocking, invoices.get, JSON, serial calls",
            ours=round(ours, 1),
            baseline=round(theirs, 1),
            unit="µs",
            target=TARGET,
            note=f"BlockingInvoicingClient vs InvoicingClient awaited serially; connection "
            f"warm; median of {rounds} rounds of {CALLS:,} calls a side, in turns of {BATCH}",
        )
    ]


if __name__ == "__main__":
    from benchmarks.run import table

    print(table(run(rounds=1 if "--quick" in sys.argv else ROUNDS)))
