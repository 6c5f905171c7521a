"""What is PostgreSQL's own in `PostgresStore`: accounts sharing a database, migrations,
streamed revisions, bounded calls against a frozen server, errors, and the engine on it.

The contract every store keeps runs in test_stores.py; these use the suite's real server
(tests/servers.py), a fresh database per test.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import signal
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Iterator

import psycopg
import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._models.stored import load_invoice_documents
from invoicing_async._sync.postgres import SCHEMA
from invoicing_async.sync import PendingEntry, PostgresStore, SyncEngine
from invoicing_async.testing import FakeInvoicingService, populate
from tests import forked
from tests.integration.sync import racing_children
from tests.integration.sync.documents import documents_of
from tests.servers import PostgresServer, free_port

#: Every migration this package has, as `migrate` reports applying them to a new database.
ALL = list(range(1, SCHEMA.latest + 1))

AT = dt.datetime(2014, 7, 30, 12, 0, tzinfo=dt.timezone.utc)


def inv(ident: int, revision: int, po: str = "") -> m.Invoice:
    return m.Invoice(id=ident, revision=revision, po_number=po or f"r{revision}", state="open")


# -- accounts -------------------------------------------------------------------------------


async def test_two_accounts_in_one_database_are_isolated(postgres_url: str) -> None:
    async with (
        PostgresStore(postgres_url, account="acme") as acme,
        PostgresStore(postgres_url, account="globex") as globex,
    ):
        assert (
            await acme.apply_documents(documents_of([inv(1, 10, "acme"), inv(2, 10)]))
        ).created == [1, 2]
        # The same ids in the other account are new there, and an older revision is no
        # reason to call them stale: nothing of acme's is seen.
        fresh = await globex.apply_documents(documents_of([inv(1, 5, "globex"), inv(3, 5)]))
        assert (fresh.created, fresh.stale) == ([1, 3], [])
        assert await acme.apply_deletions([2, 3], AT) == 1  # 3 is globex's
        await acme.save_pending({7: PendingEntry(id=7, revision=1)})
        await globex.save_pending({})  # replaces globex's plan only

        assert await acme.revisions() == {1: 10}
        assert await globex.revisions() == {1: 5, 3: 5}
        one = await globex.get(1)
        assert one is not None
        assert one.po_number == "globex"
        assert await globex.get(2) is None
        assert set(await acme.deleted()) == {2}
        assert await globex.deleted() == {}
        assert set(await acme.pending()) == {7}
        assert [i.id async for i in globex.iter_invoices()] == [1, 3]


async def test_many_stores_share_one_pool_and_leave_it_open(postgres_url: str) -> None:
    async with PostgresStore.connection_pool(postgres_url, max_size=2) as pool:
        stores = [PostgresStore(pool, account=f"a{n}") for n in range(5)]
        await asyncio.gather(
            *(s.apply_documents(documents_of([inv(n, n)])) for n, s in enumerate(stores))
        )
        for store in stores:
            await store.close()
        assert not pool.closed
        async with PostgresStore(pool, account="a3") as again:
            assert await again.revisions() == {3: 3}
        assert pool.get_stats()["pool_max"] == 2


# -- batches --------------------------------------------------------------------------------


async def test_a_batch_is_one_statement_that_tells_outcomes_apart(postgres_url: str) -> None:
    async with PostgresStore(postgres_url, account="acme") as store:
        await store.apply_documents(documents_of([inv(i, 10) for i in range(1, 5)]))
        await store.apply_deletions([3, 4], AT)
        result = await store.apply_documents(
            documents_of(
                [
                    inv(5, 1),
                    inv(1, 11),
                    inv(2, 9),
                    inv(3, 10),
                    inv(4, 2),
                    inv(6, 1),
                    inv(6, 3, "six"),
                ]
            )
        )
        # 3 and 4 were tombstones: revived, and counted created whatever their revision.
        # 6 came twice: written once, at its newest revision.
        assert (result.created, result.updated, result.stale) == ([5, 3, 4, 6], [1], [2])
        assert await store.revisions() == {1: 11, 2: 10, 3: 10, 4: 2, 5: 1, 6: 3}
        six = await store.get(6)
        assert six is not None
        assert six.po_number == "six"
        assert await store.deleted() == {}


async def test_concurrent_overlapping_batches_count_each_id_created_once(
    postgres_url: str,
) -> None:
    ids = list(range(1, 101))
    async with PostgresStore(postgres_url, account="acme", max_connections=8) as store:
        # Eight writers at once, the same ids in different orders and revisions: rows are
        # locked in id order (no deadlock), and the upsert decides under the row lock.
        results = await asyncio.gather(
            *(
                store.apply_documents(
                    documents_of([inv(i, 10 + w) for i in (ids if w % 2 else ids[::-1])])
                )
                for w in range(8)
            )
        )
        assert sorted(i for r in results for i in r.created) == ids
        assert all(sorted(r.created + r.updated + r.stale) == ids for r in results)
        assert set((await store.revisions()).values()) == {17}


async def test_a_cancelled_batch_is_all_or_nothing(postgres_url: str) -> None:
    async with PostgresStore(postgres_url, account="acme") as store:
        await store.get(0)
        for n in range(30):
            batch = [inv(n * 100 + i, 1, "x" * 2000) for i in range(1, 101)]
            task = asyncio.ensure_future(store.apply_documents(documents_of(batch)))
            await asyncio.sleep(n * 0.0005)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        stored = await store.revisions()
    assert len(stored) % 100 == 0  # whole batches only
    print(f"{len(stored) // 100} of 30 cancelled batches had committed")


async def test_documents_round_trip_exactly_nul_included(postgres_url: str) -> None:
    # jsonb refuses "\u0000": such a document keeps its bytes in `raw`, and its jsonb
    # reads the NUL as the text \u0000; every other document is jsonb alone.
    odd = m.Invoice(id=1, revision=1, po_number="nul\x00 snow☃ \U0001f600", invoice_id="24\x001")
    near = m.Invoice(
        id=2, revision=1, invoice_id="24\ufffd1", state="open", po_number="\\u0000 \\\x00"
    )  # the column's stand-in; a backslash before u0000, and one before a NUL
    async with PostgresStore(postgres_url, account="acme") as store:
        assert (await store.apply_documents(documents_of([odd, near]))).created == [1, 2]
        assert await store.get(1) == odd
        assert await store.get(2) == near
        assert await store.get_by_invoice_number("24\x001") == odd
        assert await store.get_by_invoice_number("24\ufffd1") == near
        assert await store.by_state("open") == [near]
        assert [i async for i in store.iter_invoices()] == [odd, near]
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            "SELECT id, raw IS NOT NULL, document->>'po_number', document->>'invoice_id'"
            " FROM invoicing_invoices ORDER BY id"
        ).fetchall()
    assert rows == [
        (1, True, "nul\\u0000 snow☃ \U0001f600", "24\\u00001"),
        (2, True, "\\u0000 \\\\u0000", "24\ufffd1"),
    ]


async def test_documents_come_back_as_the_service_sent_them(postgres_url: str) -> None:
    # jsonb rewrites numbers (-0.0 as 0.0, 1E+2 as 100), orders keys and decodes escapes;
    # the fields the models do not know are kept as they came, so the mirror gives back
    # the service's bytes, not jsonb's reading of them. The jsonb stays queryable.
    body = (
        b'[{"invoice":{"id":1,"revision":2,"state":"open",'
        b'"zero":-0.0,"hundred":1E+2,"tiny":1.50e-3,"b":"\\u00e9","a":[-0,0.10]}}]'
    )
    docs, failed = load_invoice_documents(body, "json", limit=10)
    assert failed == []
    sent = docs[0].document
    async with PostgresStore(postgres_url, account="acme") as store:
        assert (await store.apply_documents(docs)).created == [1]
        assert [d async for d in store.iter_documents()] == [sent]
        back = await store.get(1)
    assert back is not None
    assert {k: str(v) for k, v in back.extra.items()} == {
        "zero": "-0.0",
        "hundred": "1E+2",
        "tiny": "0.00150",
        "b": "é",
        "a": "[0, Decimal('0.10')]",
    }
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute(
            "SELECT document->>'state', (document->>'hundred')::numeric FROM invoicing_invoices"
        ).fetchone()
    assert row == ("open", 100)


# -- schema ---------------------------------------------------------------------------------


def _versions(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        return [
            (int(v), str(d))
            for v, d in conn.execute(
                "SELECT version, name FROM invoicing_migrations WHERE component = 'store'"
            )
        ]


@pytest.mark.stress
async def test_concurrent_migrations_apply_each_version_once(empty_postgres_url: str) -> None:
    """Three processes (forked from one that imported the package) and six migrations in
    this one, released together (tests/integration/sync/racing_children.py)."""
    ctx = forked.context()
    for _trial in range(4):
        with psycopg.connect(empty_postgres_url) as conn:
            conn.execute(
                "DROP TABLE IF EXISTS invoicing_schema, invoicing_migrations, invoicing_invoices,"
                " invoicing_pending, invoicing_accounts, invoicing_runs"
            )
        barrier, results = ctx.Barrier(4), ctx.SimpleQueue()
        processes = [
            ctx.Process(target=racing_children.migrate, args=(empty_postgres_url, barrier, results))
            for _ in range(3)
        ]
        for process in processes:
            process.start()
        await asyncio.to_thread(barrier.wait, forked.GUARD)
        in_process = await asyncio.gather(
            *(PostgresStore.migrate(empty_postgres_url) for _ in range(6))
        )
        for process in processes:
            await asyncio.to_thread(process.join, forked.GUARD)
        outputs = [results.get() for _ in processes]
        assert [why for kind, why in outputs if kind == "error"] == []
        children = [applied for _, applied in outputs]
        applied = [str(a) for a in in_process] + children
        assert sorted(applied) == [str(ALL)] + ["[]"] * 8  # one migrated, eight found it done
        assert [v for v, _ in _versions(empty_postgres_url)] == ALL


@pytest.mark.stress
async def test_stores_opening_at_once_on_a_new_database(empty_postgres_url: str) -> None:
    for trial in range(4):
        with psycopg.connect(empty_postgres_url) as conn:
            conn.execute(
                "DROP TABLE IF EXISTS invoicing_schema, invoicing_migrations, invoicing_invoices,"
                " invoicing_pending, invoicing_accounts, invoicing_runs"
            )
        stores = [PostgresStore(empty_postgres_url, account=f"a{n}") for n in range(6)]
        try:
            results = await asyncio.gather(
                *(s.apply_documents(documents_of([inv(1, trial)])) for s in stores),
                return_exceptions=True,
            )
        finally:
            await asyncio.gather(*(s.close() for s in stores))
        assert [getattr(r, "created", r) for r in results] == [[1]] * 6
        assert len(_versions(empty_postgres_url)) == SCHEMA.latest


async def test_a_newer_schema_is_refused_untouched(postgres_url: str) -> None:
    await PostgresStore.migrate(postgres_url)
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            "INSERT INTO invoicing_migrations (component, version, name)"
            " VALUES ('store', 99, '0099_v99')"
        )
    store = PostgresStore(postgres_url, account="acme")
    with pytest.raises(ia.StoreError, match=r"schema version 99, newer .* upgrade invoicing-async"):
        await store.revisions()
    await store.close()
    with pytest.raises(ia.StoreError, match="schema version 99, newer"):
        await PostgresStore.migrate(postgres_url)
    assert [v for v, _ in _versions(postgres_url)] == [*ALL, 99]


async def test_tables_of_someone_else_are_refused(empty_postgres_url: str) -> None:
    with psycopg.connect(empty_postgres_url) as conn:
        conn.execute("CREATE TABLE invoicing_invoices (id int)")
    with pytest.raises(ia.StoreError, match="not made by invoicing-async"):
        await PostgresStore.migrate(empty_postgres_url)


async def test_without_migrate_an_old_database_is_refused(empty_postgres_url: str) -> None:
    store = PostgresStore(empty_postgres_url, account="acme", migrate=False)
    with pytest.raises(ia.StoreError, match=r"schema version 0, older .* run `migrate`"):
        await store.get(1)
    await store.close()
    assert await PostgresStore.migrate(empty_postgres_url) == ALL
    async with PostgresStore(empty_postgres_url, account="acme", migrate=False) as store:
        assert await store.get(1) is None


# -- revisions ------------------------------------------------------------------------------


@pytest.mark.stress
async def test_revisions_are_streamed_in_bounded_memory(postgres_url: str) -> None:
    rows = 200_000
    await PostgresStore.migrate(postgres_url)
    with (
        psycopg.connect(postgres_url) as conn,
        conn.cursor() as cursor,
        cursor.copy(
            "COPY invoicing_invoices (account, id, revision, document, raw, synced_at, deleted_at)"
            " FROM STDIN"
        ) as copy,
    ):
        for ident in range(1, rows + 1):
            copy.write_row(("big", ident, 1_400_000_000 + ident, "{}", b"{}", AT, None))
        for ident in range(1, 1001):  # another account's rows and a tombstone are not read
            copy.write_row(("other", ident, 1, "{}", b"{}", AT, None))
        copy.write_row(("big", rows + 1, 1, "{}", b"{}", AT, AT))
    async with PostgresStore(postgres_url, account="big") as store:
        await store.get(0)  # open the pool before measuring
        tracemalloc.start()
        try:
            started = time.perf_counter()
            revisions = await store.revisions()
            seconds = time.perf_counter() - started
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert len(revisions) == rows
    assert revisions[1] == 1_400_000_001
    assert revisions[rows] == 1_400_000_000 + rows
    assert rows + 1 not in revisions
    # Two arrays of 8-byte integers (3.2 MB) and one fetch of 5,000 rows; a dict of
    # 200,000 ints would be ~20 MB, a fetchall() of tuples more still.
    assert peak < 8 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"
    print(f"revisions of {rows} rows: {seconds:.2f}s, peak {peak / 1e6:.1f} MB traced")


async def test_revisions_come_in_pages_by_id_with_the_pending_plan(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain SELECTs by keyset (no cursor); the first also reads the pending plan, which
    the next `pending()` returns; an empty plan where none is stored writes nothing."""
    from invoicing_async._sync import postgres as store_module

    monkeypatch.setattr(store_module, "REVISIONS_PAGE", 3)
    plan = {2: PendingEntry(id=2, revision=20, attempts=1), 12: PendingEntry(id=12, revision=5)}
    async with PostgresStore.connection_pool(postgres_url) as pool:
        store = PostgresStore(pool, account="acme")
        await store.apply_documents(documents_of([inv(i, i) for i in range(1, 10)]))
        await store.apply_deletions([4], AT)
        await store.save_pending(plan)
        assert dict(await store.revisions()) == {i: i for i in range(1, 10) if i != 4}
        assert await store.pending() == plan
        await store.save_pending({2: plan[2]})
        assert await store.pending() == {2: plan[2]}  # read again: the write is seen
        await store.save_pending({})
        assert dict(await store.revisions()) == {i: i for i in range(1, 10) if i != 4}
        assert await store.pending() == {}
    # The pool is closed: a statement would fail. The plan is known empty: none is sent.
    await store.save_pending({})
    with pytest.raises(ia.StoreError):
        await store.save_pending(plan)


# -- failures -------------------------------------------------------------------------------


def _process_tree(root: int) -> list[int]:
    """`root` and every process below it, parents first (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(entry))
    order, queue = [], [root]
    while queue:
        pid = queue.pop(0)
        order.append(pid)
        queue.extend(parents.get(pid, []))
    return order


@contextlib.contextmanager
def frozen(server: PostgresServer) -> Iterator[None]:
    """The server stopped (SIGSTOP), always resumed after.

    The postmaster and every backend: each connection has its own backend process, so
    stopping the postmaster alone leaves open connections answering. As root the server
    runs under `runuser`, so the tree is walked from `server.process`.
    """
    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc to find the server's processes")
    pids = _process_tree(server.process.pid)
    stopped: list[int] = []
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
        yield
    finally:
        for pid in reversed(stopped):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


async def test_a_frozen_server_is_a_store_error_in_bounded_time(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    async with PostgresStore(postgres_url, account="acme", timeout=1.5) as store:
        await store.apply_documents(documents_of([inv(1, 1)]))  # a live connection in the pool
        cold = PostgresStore(postgres_url, account="acme", timeout=1.5)  # must connect
        with frozen(postgres_server):
            for call, writes in (
                (store.apply_documents(documents_of([inv(2, 1)])), True),
                (store.revisions(), False),
                (cold.get(1), False),
            ):
                # The store's own 1.5 s timeout fired (the message says so), not a hang
                # until the driver gave up.
                with pytest.raises(
                    ia.StoreError, match=r"no answer within 1.5s .* server is up"
                ) as caught:
                    await call
                assert ("the write may still land" in str(caught.value)) == writes
        await cold.close()
        # Once the server is back, the store works again (a broken connection is replaced).
        for _ in range(3):
            with contextlib.suppress(ia.StoreError):
                await store.apply_documents(documents_of([inv(3, 1)]))
                break
        # Invoice 2 had reached the server's socket before it froze: a timed-out write may
        # land later (as with any database), which is why the message says so.
        assert dict(await store.revisions()).items() >= {1: 1, 3: 1}.items()


async def test_a_blocked_statement_is_cancelled_by_the_server(postgres_url: str) -> None:
    async with PostgresStore(postgres_url, account="acme", timeout=3, statement_timeout=0.5) as s:
        await s.apply_documents(documents_of([inv(1, 1)]))
        with psycopg.connect(postgres_url) as holder:
            holder.execute("SELECT * FROM invoicing_invoices WHERE id = 1 FOR UPDATE")
            # The server cancelled it at statement_timeout (QueryCanceled, below), well
            # before the store's own timeout of 3 s.
            with pytest.raises(ia.StoreError, match="statement_timeout") as caught:
                await s.apply_documents(documents_of([inv(1, 2)]))
            assert "no answer within" not in str(caught.value)  # not the store's timeout
            holder.rollback()
        assert "QueryCanceled" in str(caught.value)
        assert (await s.apply_documents(documents_of([inv(1, 2)]))).updated == [
            1
        ]  # nothing was kept


async def test_an_unreachable_server_or_missing_database_is_named(
    postgres_server: PostgresServer,
) -> None:
    closed = PostgresStore(
        f"postgresql://me:hunter2@127.0.0.1:{free_port()}/db", account="acme", timeout=5
    )
    assert "hunter2" not in repr(closed)
    with pytest.raises(ia.StoreError) as caught:
        await closed.revisions()
    await closed.close()
    message = str(caught.value)
    assert "postgresql://me@127.0.0.1:" in message
    assert "hunter2" not in message
    assert "server is up" in message
    missing = PostgresStore(postgres_server.url("no_such_db"), account="acme", timeout=5)
    with pytest.raises(ia.StoreError, match="does not exist"):
        await missing.revisions()
    await missing.close()


NO_PSYCOPG_CHILD = textwrap.dedent(
    """
    import sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("psycopg", "psycopg_pool"):
                raise ImportError(f"No module named {name!r}")
    sys.meta_path.insert(0, Block())
    from invoicing_async.errors import ConfigurationError
    from invoicing_async.sync import PostgresStore
    try:
        PostgresStore("postgresql://localhost/x", account="acme")
    except ConfigurationError as exc:
        print(exc)
    assert "psycopg" not in sys.modules
    """
)


def test_the_package_imports_without_psycopg() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", NO_PSYCOPG_CHILD], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "pip install -e '.[postgres]'" in done.stdout


# -- the engine -----------------------------------------------------------------------------


async def test_the_engine_syncs_into_postgres(postgres_url: str) -> None:
    async with FakeInvoicingService(invoices=0, limit=100_000) as service:
        populate(service.account, 321, seed=4)
        async with (
            service.client(format="json") as client,
            PostgresStore(postgres_url, account="acme") as store,
        ):
            first = await SyncEngine(client, store, concurrency=3).run()
            assert (first.created, first.complete) == (321, True)
            ids = sorted(service.account.invoices)
            for ident in ids[:5]:
                service.account.delete_invoice(ident)
            for ident in ids[5:45]:
                service.account.mutate(ident)
            second = await SyncEngine(client, store).run()
            assert (second.deleted, second.updated, second.created) == (5, 40, 0)
            assert second.requests == 1 + 1  # the list, and one batch of 40
            for ident, invoice in service.account.invoices.items():
                assert await store.get(ident) == service.account.as_read(invoice, "json")
            assert await store.revisions() == {
                i: invoice.revision for i, invoice in service.account.invoices.items()
            }
            assert set(await store.deleted()) == set(ids[:5])
            stored = await store.revisions()
            # What is left is a recheck of invoices read within their revision's second.
            for ident, entry in (await store.pending()).items():
                assert entry.revision == stored[ident]
