"""Children of bench_jobs.

python -m benchmarks.jobs_worker worker LOG ARGS…   `invoicing-async worker ARGS…`, each
    PostgresStore.apply_documents (one batch, one commit) timed and appended to LOG in ms
    (with $BENCH_JOBS_PROFILE=DIR, under cProfile: DIR/worker-PID.prof)
python -m benchmarks.jobs_worker revisions URL ACCOUNT   reads the account's revisions
    from PostgresStore; prints the peak RSS (MiB) before and after, and the count
python -m benchmarks.jobs_worker batches URL ACCOUNT   writes the account's invoices to
    fresh accounts, 100 a batch, and prints each apply_documents's time (ms)
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import psycopg

from benchmarks.memory_child import peak_mib
from invoicing_async._cli import main
from invoicing_async.sync import BatchResult, InvoiceDocument, PostgresStore


def timed_worker(log: str, argv: list[str]) -> int:
    """The worker command with every batch commit timed (one line per batch, O_APPEND)."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    original = PostgresStore.apply_documents  # what the engine calls

    @functools.wraps(original)
    async def apply_documents(self: PostgresStore, *args: Any, **kwargs: Any) -> BatchResult:
        start = time.perf_counter()
        result = await original(self, *args, **kwargs)
        os.write(fd, b"%.3f\n" % ((time.perf_counter() - start) * 1000))
        return result

    PostgresStore.apply_documents = apply_documents  # type: ignore[method-assign]
    profile_to = os.environ.get("BENCH_JOBS_PROFILE")
    if not profile_to:
        return main(argv)
    import cProfile  # where a worker's CPU goes: `BENCH_JOBS_PROFILE=DIR`, one file a worker

    # CPU seconds, not wall: on a shared machine wall time counts the other processes too.
    profiler = cProfile.Profile(time.process_time)
    try:
        return profiler.runcall(main, argv)
    finally:
        profiler.dump_stats(os.path.join(profile_to, f"worker-{os.getpid()}.prof"))


async def read_revisions(url: str, account: str) -> None:
    async with PostgresStore(url, account=account, migrate=False) as store:
        await store.pending()  # the pool and its connection are up before the baseline
        before = peak_mib()
        revisions = await store.revisions()
        print(f"{before:.1f} {peak_mib():.1f} {len(revisions)}")


async def time_batches(url: str, account: str, rounds: int = 50) -> None:
    async with PostgresStore(url, account=account, migrate=False) as source:
        invoices = [invoice async for invoice in source.iter_invoices()]
    # As the engine gives them: each invoice as the document it came as (not re-encoded).
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            "SELECT id, document FROM invoicing_invoices WHERE account = %s ORDER BY id",
            (account,),
        )
        rows = await cursor.fetchall()
    assert [row[0] for row in rows] == [invoice.id for invoice in invoices]
    documents = [
        InvoiceDocument.of(inv, bytes(row[1])) for inv, row in zip(invoices, rows, strict=True)
    ]
    times = []
    for n in range(rounds):
        async with PostgresStore(url, account=f"batch-probe-{n}", migrate=False) as store:
            for i in range(0, len(documents), 100):
                start = time.perf_counter()
                await store.apply_documents(documents[i : i + 100])
                times.append((time.perf_counter() - start) * 1000)
    print(" ".join(f"{t:.3f}" for t in times))


def run(argv: Sequence[str]) -> int:
    what, *args = argv
    if what == "worker":
        return timed_worker(args[0], args[1:])
    if what == "batches":
        asyncio.run(time_batches(args[0], args[1]))
    else:
        asyncio.run(read_revisions(args[0], args[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
