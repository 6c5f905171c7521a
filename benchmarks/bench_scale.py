"""Client CPU of a no-change sync at 10,000 and 100,000 invoices, in both formats: the
cost per invoice must stay flat (100,000 at most 12x 10,000). A JSON sync list over
4 MiB (60-90k invoices) once fell off the fast path and cost 15x per entry. The store
is filled with each invoice's id and revision (all a no-change sync reads); the fake
service runs in its own process; the figure is the best of 3 runs."""

from __future__ import annotations

import asyncio
import resource
import tempfile
from pathlib import Path

from benchmarks.common import Result
from benchmarks.server import FakeServerProcess
from invoicing_async._models.stored import InvoiceDocument
from invoicing_async.sync import SQLiteStore, SyncEngine

SIZES = (10_000, 100_000)
RUNS = 3


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _steady(invoices: int, fmt: str) -> float:
    async with FakeServerProcess(invoices=invoices) as server:
        with tempfile.TemporaryDirectory() as tmp:
            async with (
                server.client(format=fmt) as client,
                SQLiteStore(Path(tmp) / "steady.db") as store,
            ):
                entries = await client.invoices.sync_list_ids()
                documents = [
                    InvoiceDocument(
                        e.id, e.revision, None, None, None,
                        document=b'{"invoice":{"id":%d,"revision":%d}}' % (e.id, e.revision),
                    )
                    for e in entries
                ]  # fmt: skip
                for start in range(0, len(documents), 5_000):
                    await store.apply_documents(documents[start : start + 5_000])
                best = float("inf")
                for _ in range(RUNS):
                    start_cpu = _cpu()
                    report = await SyncEngine(client, store).run()
                    best = min(best, _cpu() - start_cpu)
                    assert report.created + report.updated == 0
    return best


def run() -> list[Result]:
    results = []
    for fmt in ("json", "xml"):
        small, big = (asyncio.run(_steady(n, fmt)) for n in SIZES)
        results.append(
            Result(
                f"client CPU, no-change sync of {SIZES[1]:,} / {SIZES[0]:,} invoices ({fmt})",
                big * 1000,
                small * 1000,
                "ms",
                12.0,
                note=f"per invoice {big / SIZES[1] * 1e6:.2f} / {small / SIZES[0] * 1e6:.2f} µs",
            )
        )
    return results
