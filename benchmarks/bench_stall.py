"""The event loop while a large list is decoded: the longest a 10 ms heartbeat task is
held up during `client.invoices.list()` and `client.invoices.iter()` of 1,000 and 10,000
invoices, in both formats (target <= 50 ms), with the fake service in a process of its
own. What remains for a 10,000-invoice `list()` is CPython's full garbage collection over
the ~110,000 objects the caller keeps (~0.6 µs each, every thread paused); `iter()`
keeps none of them."""

from __future__ import annotations

import asyncio

import invoicing_async as ia
from benchmarks.common import Result
from benchmarks.server import FakeServerProcess

HEARTBEAT = 0.01
TARGET = 0.050


async def _count(client: ia.InvoicingClient, how: str) -> int:
    if how == "list":
        return len(await client.invoices.list())
    return sum([1 async for _ in client.invoices.iter()])


async def _worst_stall(client: ia.InvoicingClient, how: str, size: int) -> float:
    loop = asyncio.get_running_loop()
    done = False
    longest = 0.0

    async def beat() -> None:
        nonlocal longest
        last = loop.time()
        while not done:
            await asyncio.sleep(HEARTBEAT)
            now = loop.time()
            longest = max(longest, now - last - HEARTBEAT)
            last = now

    task = asyncio.create_task(beat())
    await asyncio.sleep(0.05)
    count = await _count(client, how)
    done = True
    await task
    assert count == size
    return longest


async def _stall(size: int) -> dict[str, float]:
    worst: dict[str, float] = {}
    async with FakeServerProcess(invoices=size) as server:
        for fmt, how in (("xml", "list"), ("json", "list"), ("xml", "iter"), ("json", "iter")):
            async with server.client(format=fmt) as client:
                await client.current_session()  # connection set up before measuring
                worst[f"{how}() {fmt}"] = await _worst_stall(client, how, size)
    return worst


def run() -> list[Result]:
    results = []
    for size in (1_000, 10_000):
        measured = [asyncio.run(_stall(size)) for _ in range(3)]
        for case in measured[0]:
            runs = sorted(m[case] for m in measured)
            results.append(
                Result(
                    f"loop stall, {case} of {size:,} invoices",
                    runs[1] * 1000,
                    TARGET * 1000,
                    "ms",
                    1.0,
                    note=f"median of 3 (min {runs[0] * 1000:.1f} ms, max {runs[-1] * 1000:.1f} ms)",
                )
            )
    return results
