"""Syncs under injected faults: after the faults stop, one more run converges exactly."""

from __future__ import annotations

import asyncio
import math
import random
from pathlib import Path

import pytest

import invoicing_async as ia
from invoicing_async.sync import MemoryStore, SQLiteStore, SyncEngine
from invoicing_async.testing import FakeInvoicingService, FaultPlan

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

INVOICES = 1500
RUNS = 4
INJECTED = {"500", "dropped", "held", "truncated", "403", "missing", "changed after list"}


def same_as_service(store: MemoryStore, service: FakeInvoicingService) -> None:
    """The store holds every invoice as a JSON client reads it, nothing else."""
    live = {i: inv for i, inv in store.invoices.items() if i not in store.deleted}
    assert live.keys() == service.account.invoices.keys()  # nothing lost, nothing extra
    for ident, invoice in service.account.invoices.items():
        assert live[ident].revision == invoice.revision
        assert live[ident] == service.account.as_read(invoice, "json")


FAULTS = {
    "10% 500s": FaultPlan(error_rate=0.1, seed=1),
    "dropped connections": FaultPlan(drop_rate=0.15, seed=2),
    "timeouts": FaultPlan(timeout_rate=0.1, timeout_delay=2.0, seed=3),
    "truncated bodies": FaultPlan(truncate_rate=0.15, seed=4),
    "budget cut mid-run": FaultPlan(budget_cut_after=6),
    "ids never returned": FaultPlan(missing_ids={3, 333, 1499}),
    "changes between list and fetch": FaultPlan(mutate_after_list=60, seed=5),
    "everything at once": FaultPlan(
        error_rate=0.05, drop_rate=0.05, truncate_rate=0.05, mutate_after_list=20, seed=6
    ),
}


@pytest.mark.parametrize("name", list(FAULTS))
async def test_sync_converges_after_faults(name: str, record: list[dict[str, object]]) -> None:
    async with FakeInvoicingService(invoices=INVOICES, seed=7, limit=100_000) as service:
        account = service.account
        account.record_bodies = False
        account.faults = FAULTS[name]
        store = MemoryStore()
        runs: list[object] = []
        rng = random.Random(name)
        retry = ia.RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05)
        async with service.client(format="json", timeout=0.5, retry=retry) as client:
            for _ in range(RUNS):  # a job that runs again after a bad night
                try:
                    runs.append(await SyncEngine(client, store, max_batch_failures=50).run())
                except ia.InvoicingError as exc:  # the list itself may fail: try again later
                    runs.append(exc)
                for ident in rng.sample(sorted(account.invoices), 300):
                    account.mutate(ident)  # the day's changes
                service.clock.advance(seconds=3600)  # the next run is an hour later
            refused = account.counters["403"]
        # The faults stop (for the budget: the hour is over, a new process starts; for
        # quarantined ids: their quarantine time is over).
        account.faults = FaultPlan()
        account.requests_total = 0
        async with service.client(format="json") as client:
            final = await SyncEngine(client, store, quarantine_for=0).run()
        injected = {k: v for k, v in account.counters.items() if k in INJECTED and v}
        assert final.complete
        same_as_service(store, service)
        lost = len(service.account.invoices.keys() - (store.invoices.keys() - store.deleted.keys()))
        record.append(
            {
                "scenario": name,
                "runs": len(runs) + 1,
                "faults": ", ".join(f"{v} {k}" for k, v in sorted(injected.items())) or "-",
                "invoices": INVOICES,
                "lost": lost,
                "extra": f"{final.requests} (1 list + {final.batches} batches)",
            }
        )
        # A spent budget stops the client: only requests already in flight were refused.
        assert refused <= (4 if name == "budget cut mid-run" else 0)
        # After the faults, the last run fetches at most what is left, in full batches.
        assert final.requests <= 1 + math.ceil(final.planned / 100)


async def test_kill_mid_batch_commit_leaves_no_half_batch(tmp_path: Path) -> None:
    """Cancelling a run (a shutdown with requests in flight) keeps batches whole."""
    db = tmp_path / "cancel.db"
    async with FakeInvoicingService(invoices=INVOICES, seed=8, limit=100_000) as service:
        service.account.faults.latency = 0.02
        async with service.client(format="json") as client, SQLiteStore(db) as store:
            committed = asyncio.Event()
            engine = SyncEngine(client, store, concurrency=4, on_batch=lambda _: committed.set())
            task = asyncio.create_task(engine.run())
            await asyncio.wait_for(committed.wait(), 60)  # cancelled with 3 more in flight
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            stored = await store.revisions()
            # Whole batches of 100: the one committed before the cancel, maybe those in
            # flight, never all 15 (the run was cut short) and never part of one.
            assert len(stored) % 100 == 0
            assert 100 <= len(stored) < INVOICES
            service.account.faults.latency = 0
            report = await SyncEngine(client, store).run()
            assert report.created == INVOICES - len(stored)
            assert len(await store.revisions()) == INVOICES


async def test_many_coroutines_share_one_client_and_budget() -> None:
    """An async web backend under load: no request beyond the budget, clean shutdown."""
    async with FakeInvoicingService(invoices=20, limit=350) as service:
        budget = ia.RateBudget(limit=30)
        client = service.client(budget=budget, max_wait=0)
        outcomes: list[str] = []

        async def handler() -> None:
            try:
                await client.invoices.get(1)
                outcomes.append("ok")
            except ia.RateLimitExceeded:
                outcomes.append("budget")

        await asyncio.gather(*(handler() for _ in range(200)))
        await client.aclose()
        assert client.is_closed  # and no unclosed-session warning (warnings are errors)
        assert outcomes.count("ok") == 30  # the whole budget at once, and not one request more
        assert service.account.window.used == 30
        assert service.account.counters["403"] == 0


async def test_credentials_never_reach_the_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "secret.db"
    async with (
        FakeInvoicingService(invoices=50, password="pw-must-not-leak-9f3") as service,
        service.client() as client,
        SQLiteStore(db) as store,
    ):
        await SyncEngine(client, store).run()
    for path in db.parent.iterdir():
        assert b"pw-must-not-leak-9f3" not in path.read_bytes()
        assert b"api-user" not in path.read_bytes()
    assert db.stat().st_mode & 0o777 == 0o600
