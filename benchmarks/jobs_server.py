"""The fake service of bench_jobs, in its own process: N accounts, each on a port of its own.

python -m benchmarks.jobs_server ACCOUNTS INVOICES PASSWORD URLS_OUT

Generates every account's invoices first (the time is printed), writes each account's base
URL to URLS_OUT (JSON), prints "ready"; then answers each line read from stdin with a JSON
line: per account, [requests answered or refused, 403s].
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from invoicing_async.testing import FakeInvoicingService, populate


async def serve(accounts: int, invoices: int, password: str, urls_out: str) -> None:
    started = time.perf_counter()
    service = FakeInvoicingService(
        tls=False, port_per_account=True, username="bench-1", password=password
    )
    for n in range(1, accounts + 1):
        account = (
            service.account if n == 1 else service.add_account(f"bench-{n}", password=password)
        )
        account.record_bodies = False
        populate(account, invoices, seed=0)
    generated = time.perf_counter() - started
    async with service:
        urls = {name: service.base_url_for(a) for name, a in service.accounts.items()}
        await asyncio.to_thread(Path(urls_out).write_text, json.dumps(urls))
        print(f"generated {accounts} x {invoices} in {generated:.1f}s", flush=True)
        print("ready", flush=True)
        while await asyncio.to_thread(sys.stdin.readline):
            stats = {
                name: [a.requests_total, a.counters["403"]] for name, a in service.accounts.items()
            }
            print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    count, per_account, secret, path = sys.argv[1:]
    asyncio.run(serve(int(count), int(per_account), secret, path))
