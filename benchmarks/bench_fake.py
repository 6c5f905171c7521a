"""The fake service off the critical path: its CPU per listed invoice (kept documents and
the direct XML writer against a from-scratch `dump_list`), and, for a 100,000-invoice
account served from its own process, time to first byte and the server's peak RSS."""

from __future__ import annotations

import asyncio
import ssl
import time
from pathlib import Path

import aiohttp

from benchmarks.common import Result, best_of
from benchmarks.server import FakeServerProcess
from invoicing_async._models.documents import Format
from invoicing_async.models import Invoice
from invoicing_async.testing import FakeInvoicingService
from invoicing_async.testing._documents import InvoiceDocuments
from invoicing_async.testing._writers import dump_list

LISTED = 3000
BIG = 100_000


def _encode_results(fmt: Format) -> list[Result]:
    service = FakeInvoicingService(invoices=LISTED, seed=2014)
    invoices = service.account.list_invoices()
    documents = service.account.documents
    scratch = best_of(lambda: dump_list(invoices, fmt, Invoice, real_shape=True), repeat=3)
    first = best_of(lambda: InvoiceDocuments().list_body(invoices, fmt), repeat=3)
    kept = best_of(lambda: documents.list_body(invoices, fmt), repeat=10)
    assert documents.list_body(invoices, fmt) == dump_list(invoices, fmt, Invoice, real_shape=True)
    per = 1e6 / LISTED
    return [
        Result(
            name=f"fake: {fmt.upper()} list of {LISTED} invoices, first encode",
            ours=first * per,
            baseline=scratch * per,
            unit="us/invoice",
            # XML: the direct writer instead of xmltodict; JSON was already json.dumps.
            target=0.25 if fmt == "xml" else 1.2,
            note="baseline: dump_list from scratch (what every response cost before)",
        ),
        Result(
            name=f"fake: {fmt.upper()} list of {LISTED} invoices, unchanged since",
            ours=kept * per,
            baseline=scratch * per,
            unit="us/invoice",
            target=0.1,
            note="the kept documents joined; baseline: dump_list from scratch",
        ),
    ]


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _big_account() -> dict[str, float]:
    """(seconds to first byte, seconds to the last) of the full list and the sync list."""
    figures: dict[str, float] = {}
    async with FakeServerProcess(invoices=BIG) as server:
        assert server.process is not None
        figures["rss_idle"] = _peak_rss_mb(server.process.pid)
        context = ssl.create_default_context(cafile=str(server.ca))
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context),
            headers={"Authorization": aiohttp.BasicAuth("api-user", "bench-pw").encode()},
        )
        async with session:
            for name, path in (("sync", "invoices/sync_list_ids"), ("list", "invoices")):
                start = time.perf_counter()
                async with session.get(f"{server.base_url}/api/v1.0/{path}.xml") as resp:
                    await resp.content.readany()
                    figures[f"{name}_ttfb"] = time.perf_counter() - start
                    size = 0
                    async for chunk in resp.content.iter_chunked(1 << 20):
                        size += len(chunk)
                    figures[f"{name}_total"] = time.perf_counter() - start
                figures[f"{name}_rss"] = _peak_rss_mb(server.process.pid)
    return figures


def run() -> list[Result]:
    results = _encode_results("xml") + _encode_results("json")
    big = asyncio.run(_big_account())
    for name, label in (("sync", "sync list"), ("list", "full XML list")):
        results.append(
            Result(
                name=f"fake: {BIG:,} invoices, {label}: time to first byte",
                ours=big[f"{name}_ttfb"],
                baseline=big[f"{name}_total"],
                unit="s",
                target=0.0,
                informational=True,
                note=f"baseline: the whole body; the server's peak RSS {big[f'{name}_rss']:.0f} "
                f"MB after it ({big['rss_idle']:.0f} MB with the account generated)",
            )
        )
    return results
