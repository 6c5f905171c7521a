"""The event loop while a large list is decoded: the longest a 10 ms heartbeat task is
held up during `client.invoices.list()` and `client.invoices.iter()` of 1,000 and 10,000
invoices, in both formats (target <= 50 ms), with the fake service in a process of its
own. What remains for a 10,000-invoice `list()` is CPython's full garbage collection over
the ~110,000 objects the caller keeps (~0.6 µs each, every thread paused); `iter()`
keeps none of them."""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import invoicing_async as ia
from benchmarks.common import Result
from benchmarks.server import FakeServerProcess
from invoicing_async.models import Invoice

HEARTBEAT = 0.01
TARGET = 0.050


async def _fetch(client: ia.InvoicingClient, how: str) -> list[Invoice] | int:
    """The listed invoices (kept: freeing 10,000 of them is the caller's work, measured
    apart), or how many `iter()` yielded."""
    if how == "list":
        return await client.invoices.list()
    return sum([1 async for _ in client.invoices.iter()])


class _FullCollections:
    """The intervals (monotonic seconds) of CPython's full collections while it is active,
    so a heartbeat gap can be told apart: ours, or the interpreter's collector."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._start = time.monotonic()
        else:
            self.spans.append((self._start, time.monotonic()))

    def overlap(self, start: float, end: float) -> bool:
        return any(s < end and e > start for s, e in self.spans)

    def longest(self) -> float:
        return max((e - s for s, e in self.spans), default=0.0)


async def _worst_stall(
    client: ia.InvoicingClient, how: str, size: int
) -> tuple[float, float, float]:
    """The longest heartbeat delay, the longest that no full collection overlapped, and the
    seconds the caller then spends freeing what it was given."""
    loop = asyncio.get_running_loop()
    done = False
    gaps: list[tuple[float, float]] = []
    collections = _FullCollections()

    async def beat() -> None:
        last = loop.time()  # time.monotonic, the clock the collector spans use
        while not done:
            await asyncio.sleep(HEARTBEAT)
            now = loop.time()
            gaps.append((last, now))
            last = now

    task = asyncio.create_task(beat())
    await asyncio.sleep(0.05)
    gc.callbacks.append(collections)
    try:
        result = await _fetch(client, how)
    finally:
        gc.callbacks.remove(collections)
    done = True
    await task
    assert (len(result) if isinstance(result, list) else result) == size
    delays = [(end - start - HEARTBEAT, collections.overlap(start, end)) for start, end in gaps]
    started = time.monotonic()
    del result
    freed = time.monotonic() - started
    worst = max(d for d, _ in delays)
    return worst, max((d for d, gc_ in delays if not gc_), default=0.0), freed


async def _stall(size: int) -> dict[str, tuple[float, float, float]]:
    worst: dict[str, tuple[float, float, float]] = {}
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
            for index, label in ((0, ""), (1, ", apart from full collections")):
                runs = sorted(m[case][index] for m in measured)
                results.append(
                    Result(
                        f"loop stall, {case} of {size:,} invoices{label}",
                        runs[1] * 1000,
                        TARGET * 1000,
                        "ms",
                        1.0,
                        note=f"median of 3 (min {runs[0] * 1000:.1f} ms,"
                        f" max {runs[-1] * 1000:.1f} ms)",
                    )
                )
            if case.startswith("list()"):
                runs = sorted(m[case][2] for m in measured)
                results.append(
                    Result(
                        f"freeing the {size:,} invoices of {case} (the caller's, on its thread)",
                        runs[1] * 1000,
                        TARGET * 1000,
                        "ms",
                        1.0,
                        note=f"median of 3 (min {runs[0] * 1000:.1f} ms)",
                        informational=True,
                    )
                )
    return results
