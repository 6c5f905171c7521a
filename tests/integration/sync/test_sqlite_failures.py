"""SQLiteStore when the file or the disk lets it down: a `StoreError` that says what to do,
and no change to a file it cannot use."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest

import invoicing_async as ia
from invoicing_async.sync import SQLiteStore
from tests import forked
from tests.integration.sync import racing_children


def snapshot(path: Path) -> bytes:
    return path.read_bytes()


def test_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "newer.db"
    with sqlite3.connect(db) as raw:
        raw.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        raw.execute("INSERT INTO meta VALUES ('schema_version', '7')")
        raw.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, blob_v7 BLOB)")
    raw.close()
    before = snapshot(db)
    with pytest.raises(ia.StoreError, match=r"schema version 7, newer .* upgrade invoicing-async"):
        SQLiteStore(db)
    assert snapshot(db) == before
    assert not Path(f"{db}-wal").exists()


@pytest.mark.parametrize(
    "setup",
    [
        "CREATE TABLE customers (id INTEGER PRIMARY KEY)",  # someone else's database
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",  # no version row
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('schema_version', 'two')",  # an unreadable version
    ],
)
def test_a_foreign_or_unversioned_database_is_refused_untouched(tmp_path: Path, setup: str) -> None:
    db = tmp_path / "foreign.db"
    with sqlite3.connect(db) as raw:
        raw.executescript(setup)
    raw.close()
    before = snapshot(db)
    with pytest.raises(ia.StoreError, match="not an invoicing-async store"):
        SQLiteStore(db)
    assert snapshot(db) == before


@pytest.mark.parametrize(
    "content",
    [b"this is not sqlite at all" * 100, b"SQLite format 3\x00" + b"\xff" * 4000, b"\x00" * 8192],
)
def test_a_corrupt_file_is_refused_untouched(tmp_path: Path, content: bytes) -> None:
    db = tmp_path / "corrupt.db"
    db.write_bytes(content)
    with pytest.raises(ia.StoreError, match="corrupt or not a SQLite database"):
        SQLiteStore(db)
    assert db.read_bytes() == content


def test_an_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(ia.StoreError, match="cannot open"):
        SQLiteStore(tmp_path / "no-such-folder" / "s.db")


@pytest.mark.stress
async def test_several_processes_creating_one_new_file_at_once(tmp_path: Path) -> None:
    """Three processes forked from one that imported the package, released together by a
    barrier: they race on the creation itself (tests/integration/sync/racing_children.py)."""
    ctx = forked.context()
    for trial in range(8):
        db = tmp_path / f"new-{trial}.db"
        barrier, failures = ctx.Barrier(3), ctx.SimpleQueue()
        processes = [
            ctx.Process(target=racing_children.create, args=(str(db), barrier, failures))
            for _ in range(3)
        ]
        for process in processes:
            process.start()
        for process in processes:
            await asyncio.to_thread(process.join, forked.GUARD)
        errors = []
        while not failures.empty():
            errors.append(failures.get())
        assert errors == []
        assert [p.exitcode for p in processes] == [0, 0, 0]
        with sqlite3.connect(db) as raw:
            assert raw.execute("SELECT value FROM meta").fetchall() == [("1",)]
        raw.close()


DISK_FULL_CHILD = textwrap.dedent(
    """
    import asyncio, resource, signal, sys
    from invoicing_async import models as m, StoreError
    from invoicing_async.sync import InvoiceDocument, SQLiteStore

    async def main(path):
        store = SQLiteStore(path)
        # From here on no file may grow past 1 MiB (a new one is 128 KiB of 16 KiB pages,
        # a batch about 70 KiB): writes fail as on a full disk.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024 * 1024, 1024 * 1024))
        for batch in range(1000):
            invoices = [m.Invoice(id=batch * 100 + i, revision=1, po_number="x" * 500)
                        for i in range(1, 101)]
            try:
                await store.apply_documents([InvoiceDocument.of(i) for i in invoices])
            except StoreError as exc:
                print(batch, exc, sep="|")
                return
        print("never full")

    asyncio.run(main(sys.argv[1]))
    """
)


async def test_a_full_disk_is_named_and_leaves_whole_batches(tmp_path: Path) -> None:
    db = tmp_path / "full.db"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        DISK_FULL_CHILD,
        str(db),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert b"never retrieved" not in err
    batches, message = out.decode().strip().split("|", 1)
    # A file-size limit reads as an I/O error to SQLite, a full disk as SQLITE_FULL.
    assert "disk is full" in message or "disk may be full" in message
    assert "cannot rollback" not in message
    assert int(batches) > 0
    async with SQLiteStore(db) as store:
        stored = await store.revisions()
    assert len(stored) % 100 == 0  # whole batches only
    assert len(stored) <= int(batches) * 100


async def test_a_blocked_store_leaves_the_default_thread_pool_alone(tmp_path: Path) -> None:
    """A store call waiting on another process's lock runs in the stores' own pool: the
    loop's default pool (`asyncio.to_thread`, here of one thread) stays free."""
    from concurrent.futures import ThreadPoolExecutor

    from invoicing_async.sync import InvoiceDocument

    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(1))
    path = tmp_path / "s.db"
    async with SQLiteStore(path, busy_timeout=30) as store:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        document = InvoiceDocument.of(ia.models.Invoice(id=1, revision=1))
        blocked = asyncio.ensure_future(store.apply_documents([document]))
        await asyncio.sleep(0)
        assert await asyncio.wait_for(asyncio.to_thread(lambda: 42), 5) == 42
        assert not blocked.done()
        holder.execute("ROLLBACK")
        holder.close()
        assert (await blocked).created == [1]


SYNC_DISK_FULL_CHILD = textwrap.dedent(
    """
    import asyncio, resource, signal, sys
    import invoicing_async as ia
    from invoicing_async.sync import SQLiteStore, SyncEngine

    async def main(path, base_url, username, password):
        auth = ia.BasicAuth(username, password)
        async with (
            ia.InvoicingClient(base_url, auth=auth, format="json",
                               budget=ia.RateBudget(limit=100_000)) as client,
            SQLiteStore(path) as store,
        ):
            await store.revisions()  # the file and its schema exist
            # From here on no file may grow past 2 MiB: writes fail as on a full disk.
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))
            try:
                report = await SyncEngine(client, store, concurrency=2).run()
            except ia.StoreError as exc:
                print("StoreError", exc, sep="|")
            else:
                print("report", report.created, report.complete, report.error, sep="|")

    asyncio.run(main(*sys.argv[1:]))
    """
)


async def test_a_disk_that_fills_during_a_sync_run_is_named_and_the_next_run_finishes(
    tmp_path: Path,
) -> None:
    """The engine mid-run on a disk that fills: the run ends with a message that names the
    disk, the file holds whole batches only and passes SQLite's integrity check, and a run
    with space again stores the rest."""
    from invoicing_async.sync import SyncEngine
    from invoicing_async.testing import FakeInvoicingService

    db = tmp_path / "mirror.db"
    async with FakeInvoicingService(tls=False, invoices=1500, seed=11) as service:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", SYNC_DISK_FULL_CHILD, str(db),
            service.base_url, service.username, service.password,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        kind, *rest = out.decode().strip().split("|")
        message = rest[0] if kind == "StoreError" else rest[2]
        assert kind in ("StoreError", "report"), out
        assert "disk is full" in message or "disk may be full" in message, message
        assert "Traceback" not in err.decode()
        with sqlite3.connect(db) as raw:
            assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            kept = raw.execute("SELECT count(*) FROM invoices").fetchone()[0]
        raw.close()
        assert 0 < kept < 1500, (kind, message)
        assert kept % 100 == 0  # whole batches only
        async with service.client(format="json") as client, SQLiteStore(db) as store:
            report = await SyncEngine(client, store).run()
            assert report.complete
            assert len(await store.revisions()) == 1500
    print(f"\n{kept} of 1500 invoices kept when the disk filled; {kind}: {message}")
