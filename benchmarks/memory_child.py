"""Run in a fresh process by bench_memory; prints its peak RSS in MiB on the last line.

python -m benchmarks.memory_child sync BASE_URL CA DB
python -m benchmarks.memory_child diff N DB
"""

from __future__ import annotations

import asyncio
import resource
import sqlite3
import ssl
import sys

import invoicing_async as ia
from invoicing_async._models.documents import load_sync_revisions
from invoicing_async._sync.plan import plan_sync
from invoicing_async.sync import SQLiteStore, SyncEngine


def peak_mib() -> float:
    """This process's own peak RSS. (`ru_maxrss` would include the parent's peak from
    before exec on Linux; VmHWM belongs to this program alone.)"""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def sync(base_url: str, ca: str, db: str) -> None:
    context = ssl.create_default_context(cafile=ca)
    async with (
        ia.InvoicingClient(
            base_url,
            auth=ia.BasicAuth("api-user", "bench-pw"),
            ssl=context,
            format="json",
            budget=ia.RateBudget(limit=10**9),
        ) as client,
        SQLiteStore(db) as store,
    ):
        report = await SyncEngine(client, store).run()
    print(f"synced {report.created} in {report.requests} requests", file=sys.stderr)


def write_and_read_list(count: int, path: str) -> bytes:
    """The list as the service sends it, written piece by piece so that making it does
    not weigh on the figure; a tenth of the revisions are newer than stored."""
    with open(path, "wb") as out:
        out.write(b"[")
        for i in range(1, count + 1):
            revision = 1001 if i % 10 == 0 else 1000
            sep = b"," if i > 1 else b""
            out.write(b'%s{"invoice":{"id":%d,"revision":%d}}' % (sep, i, revision))
        out.write(b"]")
    with open(path, "rb") as src:
        return src.read()


async def diff(count: int, db: str) -> None:
    async with SQLiteStore(db) as store:
        # The store holds every invoice; a tenth changed since. Rows go in through a
        # connection of our own (the store made the schema), without building models.
        raw = sqlite3.connect(db)
        with raw:
            raw.executemany(
                "INSERT INTO invoices (id, revision, document, synced_at) "
                "VALUES (?, ?, x'7b7d', '')",
                ((i, 1000) for i in range(1, count + 1)),
            )
        raw.close()
        body = write_and_read_list(count, f"{db}.list.json")
        baseline = peak_mib()
        entries = load_sync_revisions(body, "json")
        del body
        after_decode = peak_mib()
        stored = await store.revisions()
        after_store = peak_mib()
        plan = plan_sync(entries, stored, await store.pending())
        print(f"after decode {after_decode:.0f}, after store {after_store:.0f}", file=sys.stderr)
    print(
        f"planned {len(plan.to_fetch)} of {plan.listed}; before decoding {baseline:.0f} MiB",
        file=sys.stderr,
    )


if __name__ == "__main__":
    what, *args = sys.argv[1:]
    if what == "sync":
        asyncio.run(sync(*args))
    else:
        asyncio.run(diff(int(args[0]), args[1]))
    print(f"{peak_mib():.1f}")
