"""Many accounts in one process: 500 accounts, each syncing 1,000 changed invoices from the
fake service (in its own process), budgets not binding. Reports invoices per second and
client CPU per invoice, against the CPU of decoding alone (the floor of any client)."""

from __future__ import annotations

import asyncio
import resource
import time

from benchmarks.common import Result, best_of
from benchmarks.server import FakeServerProcess
from invoicing_async._models.documents import load_list
from invoicing_async.models import Invoice
from invoicing_async.sync import MemoryStore, SyncEngine
from invoicing_async.testing import FakeInvoicingService
from invoicing_async.testing._writers import dump_list

ACCOUNTS = 500
INVOICES = 1000
AT_ONCE = 50  # accounts syncing at the same time


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def decode_cpu_per_invoice() -> float:
    service = FakeInvoicingService(invoices=100, seed=0)
    body = dump_list(list(service.account.invoices.values()), "json", Invoice)
    return best_of(lambda: load_list(body, "json", Invoice), repeat=10) / 100


async def _all() -> tuple[float, float, int]:
    async with FakeServerProcess(invoices=INVOICES, accounts=ACCOUNTS) as server:
        names = ["api-user"] + [f"account-{n}" for n in range(2, ACCOUNTS + 1)]
        gate = asyncio.Semaphore(AT_ONCE)
        synced = 0

        async def one(name: str) -> None:
            nonlocal synced
            async with gate, server.client(name, format="json") as client:
                report = await SyncEngine(client, MemoryStore()).run()
                synced += report.created

        cpu, start = _cpu(), time.perf_counter()
        await asyncio.gather(*(one(name) for name in names))
        return time.perf_counter() - start, _cpu() - cpu, synced


def run() -> list[Result]:
    wall, cpu, synced = asyncio.run(_all())
    assert synced == ACCOUNTS * INVOICES
    floor = decode_cpu_per_invoice()
    per_invoice = cpu / synced
    return [
        Result(
            name=f"{ACCOUNTS} accounts x {INVOICES} invoices: client CPU per invoice",
            ours=per_invoice * 1e6,
            baseline=floor * 1e6,
            unit="us",
            target=0.0,
            informational=True,
            note=f"{synced / wall:,.0f} invoices/s overall ({wall:.1f}s wall, {cpu:.1f}s client "
            f"CPU; the fake service has the other core); baseline: JSON decode alone; "
            "no target was set",
        )
    ]
