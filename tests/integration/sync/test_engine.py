"""The sync engine against the fake service: request costs, races, deletions, budget."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import invoicing_async as ia
from invoicing_async._models.payloads import Format
from invoicing_async.sync import (
    BatchCommitted,
    BatchResult,
    InvoiceDocument,
    MemoryStore,
    PendingEntry,
    SQLiteStore,
    SyncEngine,
    SyncProgress,
)
from invoicing_async.testing import FakeClock, FakeInvoicingService, populate
from tests.integration.sync.documents import documents_of
from tests.unit.models.counting import invoices_made


@pytest.fixture
async def big_service() -> AsyncIterator[FakeInvoicingService]:
    async with FakeInvoicingService(invoices=0, limit=100_000) as service:
        yield service


def fetch_sizes(service: FakeInvoicingService, since: int = 0) -> list[int]:
    sizes = []
    for request in service.account.requests[since:]:
        if request.path.endswith("sync_fetch_ids.xml"):
            sizes.append(request.body.count(b"<id>") or request.body.count(b",") + 1)
    return sizes


@pytest.mark.parametrize("changed", [0, 250])  # the full range runs in test_engine_memory
async def test_a_run_costs_one_list_plus_ceil_n_over_100(
    big_service: FakeInvoicingService, changed: int
) -> None:
    populate(big_service.account, 1000, seed=3)
    store = MemoryStore()
    async with big_service.client() as client:
        await SyncEngine(client, store).run()
        ids = sorted(big_service.account.invoices)[:changed]
        for ident in ids:
            big_service.account.mutate(ident)
        before = len(big_service.account.requests)
        report = await SyncEngine(client, store).run()
    expected = 1 + math.ceil(changed / 100)
    assert report.requests == expected
    assert len(big_service.account.requests) - before == expected
    assert report.updated == changed
    assert report.unchanged == 1000 - changed
    sizes = fetch_sizes(big_service, before)
    assert all(size == 100 for size in sizes[:-1])  # only the last batch may be smaller
    assert sum(sizes) == changed


async def test_store_matches_the_service_and_hooks_fire(
    big_service: FakeInvoicingService, tmp_path: Path
) -> None:
    populate(big_service.account, 321, seed=4)
    progress: list[SyncProgress] = []
    batches: list[BatchCommitted] = []
    async with big_service.client(format="json") as client, SQLiteStore(tmp_path / "s.db") as store:
        report = await SyncEngine(
            client, store, concurrency=3, on_progress=progress.append, on_batch=batches.append
        ).run()
        assert report.created == 321
        assert report.complete
        for ident, invoice in big_service.account.invoices.items():
            assert await store.get(ident) == big_service.account.as_read(invoice, "json")
        assert await store.revisions() == {
            i: inv.revision for i, inv in big_service.account.invoices.items()
        }
    assert progress[-1].done == progress[-1].total == 321
    assert sum(len(b.changed) for b in batches) == 321
    assert (tmp_path / "s.db").stat().st_mode & 0o777 == 0o600


async def test_deleted_invoices_become_tombstones(big_service: FakeInvoicingService) -> None:
    populate(big_service.account, 50, seed=5)
    store = MemoryStore()
    async with big_service.client() as client:
        await SyncEngine(client, store).run()
        for ident in (1, 2, 3):
            big_service.account.delete_invoice(ident)
        report = await SyncEngine(client, store).run()
    assert report.deleted == 3
    assert report.requests == 1
    assert await store.get(1) is None
    assert set(store.deleted) == {1, 2, 3}
    assert 1 not in await store.revisions()


async def test_mass_deletion_and_empty_list_are_refused_unless_forced(
    big_service: FakeInvoicingService,
) -> None:
    populate(big_service.account, 10, seed=6)
    store = MemoryStore()
    async with big_service.client() as client:
        await SyncEngine(client, store).run()
        for ident in list(big_service.account.invoices)[:6]:
            big_service.account.delete_invoice(ident)
        refused = await SyncEngine(client, store).run()
        assert refused.deleted == 0
        assert refused.deletions_refused is not None
        assert "50%" in refused.deletions_refused
        assert len(await store.revisions()) == 10
        forced = await SyncEngine(client, store, force_deletions=True).run()
        assert forced.deleted == 6
        for ident in list(big_service.account.invoices):
            big_service.account.delete_invoice(ident)
        empty = await SyncEngine(client, store, max_delete_share=1.0).run()
    assert empty.deletions_refused is not None
    assert "empty" in empty.deletions_refused
    assert len(await store.revisions()) == 4


async def test_changes_between_list_and_fetch_store_the_newer_revision() -> None:
    # A frozen clock: the changes, the fetch and its reply all fall in one second.
    clock = FakeClock(frozen=True)
    async with FakeInvoicingService(invoices=0, limit=100_000, clock=clock) as service:
        populate(service.account, 300, seed=7)
        clock.advance(seconds=60)
        service.account.faults.mutate_after_list = 40
        service.account.faults.seed = 7
        store = MemoryStore()
        async with service.client() as client:
            first = await SyncEngine(client, store).run()
            service.account.faults.mutate_after_list = 0
            # The stored revision is the fetched one (newer than listed). But the 40 were
            # read in their revision's own second: they are read once more, then never.
            assert first.rechecks == 40
            clock.advance(seconds=1)
            second = await SyncEngine(client, store).run()
            third = await SyncEngine(client, store).run()
        assert (second.requests, second.updated, second.rechecks) == (2, 40, 0)
        assert third.requests == 1
        assert await store.revisions() == {
            i: inv.revision for i, inv in service.account.invoices.items()
        }


async def test_an_older_revision_never_overwrites_a_newer_one() -> None:
    from invoicing_async import models as m

    store = MemoryStore()
    await store.apply_documents(documents_of([m.Invoice(id=1, revision=10, po_number="new")]))
    result = await store.apply_documents(
        documents_of([m.Invoice(id=1, revision=9, po_number="old")])
    )
    assert result.stale == [1]
    stored = await store.get(1)
    assert stored is not None
    assert stored.po_number == "new"


async def test_listed_but_missing_ids_are_retried_then_quarantined(
    big_service: FakeInvoicingService,
) -> None:
    populate(big_service.account, 150, seed=8)
    big_service.account.faults.missing_ids = {7, 8}
    store = MemoryStore()
    async with big_service.client() as client:
        first = await SyncEngine(client, store, max_attempts=3).run()
        assert sorted(first.quarantined) == [7, 8]
        assert first.created == 148
        # [1..100] misses 7 and 8; they ride in the spare room of the last batch when it
        # is still queued (attempt 2), then go alone until quarantined: bounded, never
        # endless. With 4 batches in flight the last batch may already be out.
        assert first.requests in (4, 5)
        second = await SyncEngine(client, store).run()
        assert second.requests == 1  # quarantined for this revision: not fetched again
        assert sorted(second.quarantined) == [7, 8]
        big_service.account.faults.missing_ids = set()
        big_service.account.mutate(7)  # a new revision lifts the quarantine
        third = await SyncEngine(client, store).run()
    assert third.created == 1
    assert third.requests == 2
    assert await store.get(7) is not None


async def test_dry_run_lists_and_plans_but_writes_nothing(
    big_service: FakeInvoicingService, tmp_path: Path
) -> None:
    populate(big_service.account, 250, seed=9)
    async with big_service.client() as client, SQLiteStore(tmp_path / "dry.db") as store:
        report = await SyncEngine(client, store, dry_run=True).run()
        assert report.dry_run
        assert report.requests == 1
        assert report.planned == 250
        assert await store.revisions() == {}
        assert await store.pending() == {}


@pytest.mark.slow
async def test_budget_stop_is_clean_and_the_next_run_continues() -> None:
    async with FakeInvoicingService(invoices=1000, seed=10) as service:
        budget = ia.RateBudget(limit=5)
        store = MemoryStore()
        async with service.client(budget=budget, max_wait=0) as client:
            report = await SyncEngine(client, store, concurrency=2).run()
            assert report.needed_requests == 10
            assert report.budget_available == 4  # the budget of 5, less the list
            assert report.stopped_for_budget
            assert report.requests == 5  # the whole budget: 1 list + 4 batches
            assert len(await store.revisions()) == 400
            assert len(report.pending) == 600
            assert report.eta is not None
            assert report.eta > 0
        # Later (a fresh budget): only the rest is fetched.
        async with service.client() as client:
            resumed = await SyncEngine(client, store).run()
        assert resumed.created == 600
        assert resumed.requests == 1 + 6
        assert service.account.counters["403"] == 0  # the server never had to refuse


async def test_server_refusal_mid_run_stops_cleanly(big_service: FakeInvoicingService) -> None:
    populate(big_service.account, 500, seed=11)
    big_service.account.faults.budget_cut_after = 3  # list + 2 batches, then 403s
    store = MemoryStore()
    async with big_service.client() as client:
        report = await SyncEngine(client, store, concurrency=1).run()
    assert report.stopped_for_budget
    assert len(await store.revisions()) == 200
    assert report.requests == 4  # the refused one is counted: it went out


async def test_a_json_sync_builds_no_model_and_stores_what_was_sent(
    big_service: FakeInvoicingService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Models are built only when asked for: a JSON sync into SQLite stores each invoice's
    member as the service sent it, and `get()` reads the same model the service holds."""
    populate(big_service.account, 250, seed=8)
    async with big_service.client(format="json") as client, SQLiteStore(tmp_path / "s.db") as store:
        built = invoices_made(monkeypatch)
        report = await SyncEngine(client, store).run()
        assert report.created == 250
        assert built == []
        monkeypatch.undo()
        for ident, invoice in list(big_service.account.invoices.items())[::50]:
            assert await store.get(ident) == big_service.account.as_read(invoice, "json")


class ModelsOnlyStore:
    """A user's store that keeps models: `document.model()` of each document it is given."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.batches: list[list[ia.models.Invoice]] = []

    async def revisions(self) -> dict[int, int]:
        return await self.inner.revisions()

    async def get(self, invoice_id: int) -> ia.models.Invoice | None:
        return await self.inner.get(invoice_id)

    def iter_invoices(self) -> AsyncIterator[ia.models.Invoice]:
        return self.inner.iter_invoices()

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        self.batches.append([document.model() for document in documents])
        return await self.inner.apply_documents(documents_of(self.batches[-1]))

    async def apply_deletions(self, ids: Iterable[int], at: dt.datetime) -> int:
        return await self.inner.apply_deletions(ids, at)

    async def pending(self) -> dict[int, PendingEntry]:
        return await self.inner.pending()

    async def save_pending(self, entries: Mapping[int, PendingEntry]) -> None:
        await self.inner.save_pending(entries)

    async def close(self) -> None:
        await self.inner.close()


async def test_a_store_that_keeps_models_builds_them_from_the_documents(
    big_service: FakeInvoicingService, fmt: Format
) -> None:
    populate(big_service.account, 150, seed=9)
    store = ModelsOnlyStore()
    async with big_service.client(format=fmt) as client:
        report = await SyncEngine(client, store).run()
    assert report.created == 150
    assert [len(b) for b in store.batches] == [100, 50]
    assert all(isinstance(inv, ia.models.Invoice) for b in store.batches for inv in b)
    account = big_service.account
    assert store.inner.invoices == {
        i: account.as_read(inv, fmt) for i, inv in account.invoices.items()
    }


async def test_a_store_that_keeps_models_gets_each_invoice_decoded_once(
    big_service: FakeInvoicingService, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`MemoryStore` keeps models: each is read from its checked document once, when the
    store asks for it, and never again."""
    from invoicing_async._models import stored
    from invoicing_async._models.documents import load_model

    populate(big_service.account, 150, seed=10)
    read: list[bytes] = []

    def counting(body: bytes, *args: Any) -> Any:
        read.append(body)
        return load_model(body, *args)

    monkeypatch.setattr(stored, "load_model", counting)
    store = MemoryStore()
    async with big_service.client(format="json") as client:
        assert (await SyncEngine(client, store).run()).created == 150
    assert len(read) == len(set(read)) == 150
    account = big_service.account
    assert store.invoices == {
        i: account.as_read(inv, "json") for i, inv in account.invoices.items()
    }
