"""Requests per sync against the fake service: our engine versus the minimum
1 + ceil(N/100) and versus a naive client that GETs each changed invoice (1 + N)."""

from __future__ import annotations

import asyncio
import math

from benchmarks.common import Result
from invoicing_async.sync import MemoryStore, SyncEngine
from invoicing_async.testing import FakeInvoicingService, populate

CASES = [(0, 10_000), (1, 10_000), (250, 10_000), (10_000, 10_000)]


async def _case(changed: int, total: int) -> Result:
    async with FakeInvoicingService(limit=10**9) as service:
        service.account.record_bodies = False
        populate(service.account, total, seed=changed)
        store = MemoryStore()
        async with service.client(format="json") as client:
            if changed < total:
                await SyncEngine(client, store).run()
                for ident in sorted(service.account.invoices)[:changed]:
                    service.account.mutate(ident)
            report = await SyncEngine(client, store).run()
    minimum = 1 + math.ceil(changed / 100)
    return Result(
        name=f"requests, {changed} changed of {total}",
        ours=report.requests,
        baseline=minimum,
        unit="requests",
        target=1.0,
        note=f"minimum {minimum}; naive GET-per-invoice client: {1 + changed}",
    )


def run() -> list[Result]:
    return [asyncio.run(_case(changed, total)) for changed, total in CASES]
