"""The engine's decisions against an in-memory account: costs, batches, quarantine, budget
stops, untrusted replies and same-second revisions, without HTTP."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async.sync import BatchResult, InvoiceDocument, MemoryStore, SyncEngine
from tests.unit.sync.memory_account import MemoryAccount, connection_reset
from tests.virtual_time import run_virtual


@pytest.mark.parametrize("changed", [0, 1, 99, 100, 101, 250, 1000])
async def test_a_run_costs_one_list_plus_ceil_n_over_100(changed: int) -> None:
    account = MemoryAccount(1000)
    account.tick(60)
    store = MemoryStore()
    await SyncEngine(account.client(), store).run()
    account.tick(60)
    for ident in range(1, changed + 1):
        account.change(ident)
    account.tick(60)
    account.fetch_sizes.clear()
    before = account.requests_sent
    report = await SyncEngine(account.client(), store).run()
    assert report.requests == account.requests_sent - before == 1 + math.ceil(changed / 100)
    assert (report.updated, report.unchanged) == (changed, 1000 - changed)
    assert all(size == 100 for size in account.fetch_sizes[:-1])
    assert sum(account.fetch_sizes) == changed


async def test_missing_ids_are_retried_then_quarantined_until_they_change() -> None:
    account = MemoryAccount(150)
    account.tick(60)
    account.missing = {7, 8}
    store = MemoryStore()
    first = await SyncEngine(account.client(), store, max_attempts=3).run()
    assert sorted(first.quarantined) == [7, 8]
    assert first.created == 148
    # [1..100] misses 7 and 8; they ride in the spare room of [101..150] (attempt 2), then
    # go alone (attempt 3) and are quarantined: 1 list + 3 fetches, never endless.
    assert first.requests == 4
    second = await SyncEngine(account.client(), store).run()
    assert second.requests == 1  # quarantined at this revision: not fetched again
    account.missing = set()
    account.change(7)
    account.tick(60)
    third = await SyncEngine(account.client(), store).run()
    assert (third.created, third.requests) == (1, 2)


async def test_a_budget_stop_keeps_whole_batches_and_the_next_run_continues() -> None:
    account = MemoryAccount(1000)
    account.tick(60)
    account.allowance = 5  # the list and 4 batches
    store = MemoryStore()
    report = await SyncEngine(account.client(), store, concurrency=2).run()
    assert report.stopped_for_budget
    assert account.requests_sent == 5
    assert report.requests == 6  # and the one refused with 403, which stopped the run
    assert len(await store.revisions()) == 400
    assert len(report.pending) == 600
    account.allowance = None
    resumed = await SyncEngine(account.client(), store).run()
    assert (resumed.created, resumed.requests) == (600, 1 + 6)


def test_waiting_for_budget_covers_the_sync_list_too() -> None:
    # Each refusal is waited out (up to the hour the budget estimates): in virtual time.
    run_virtual(waiting_for_budget)


async def waiting_for_budget() -> None:
    account = MemoryAccount(10)
    account.tick(60)
    account.allowance = 0
    store = MemoryStore()
    with pytest.raises(ia.RateLimitExceeded):
        await SyncEngine(account.client(), store).run()
    refills = iter([0, 0, 3])  # the budget comes back after two refusals

    original = account.spend

    def spend() -> bool:
        if account.allowance == 0:
            account.allowance = next(refills)
        return original()

    account.spend = spend  # type: ignore[method-assign]
    report = await SyncEngine(account.client(), store, wait_for_budget=True).run()
    assert report.complete
    assert report.created == 10


async def test_failed_batches_are_given_back_and_retried() -> None:
    account = MemoryAccount(300)
    account.tick(60)
    account.fail_fetches = [connection_reset(), 500]
    store = MemoryStore()
    report = await SyncEngine(account.client(), store, concurrency=1).run()
    assert report.pending == []
    assert report.created == 300
    assert len(report.errors) == 2
    assert report.requests == 1 + 3 + 2


def _mangled(ids: list[int], invoices: list[m.Invoice]) -> list[m.Invoice]:
    """A hostile reply: every invoice twice (the copy older), and strangers, up to the 100
    members a reply may hold (a longer one is refused whole)."""
    older = [
        m.Invoice(id=i.id, revision=(i.revision or 0) - 100, po_number="older") for i in invoices
    ]
    strangers = [
        m.Invoice(id=10_000 + n, revision=1, po_number="not asked for")
        for n in range(100 - 2 * len(invoices))
    ]
    return [*invoices, *older, *strangers]


async def test_replies_are_not_trusted_as_sent() -> None:
    account = MemoryAccount(40)
    account.tick(60)
    account.reply = _mangled
    store = MemoryStore()
    report = await SyncEngine(account.client(), store).run()
    assert report.created == 40
    assert await store.revisions() == {i: inv.revision for i, inv in account.data.items()}
    assert not any(i >= 10_000 for i in await store.revisions())
    assert report.ignored == 40 + 20
    stored = await store.get(5)
    assert stored is not None
    assert stored.po_number != "older"


async def test_an_invoice_read_in_its_revisions_second_is_read_again() -> None:
    account = MemoryAccount(50)  # created in the current second
    store = MemoryStore()
    first = await SyncEngine(account.client(), store).run()
    assert first.rechecks == 50  # read while their second was not over
    account.change(3, po="changed again in the same second")  # same revision!
    account.tick(1)
    second = await SyncEngine(account.client(), store).run()
    assert second.requests == 2  # list + the 50 read again
    assert second.rechecks == 0
    stored = await store.get(3)
    assert stored is not None
    assert stored.po_number == "changed again in the same second"
    third = await SyncEngine(account.client(), store).run()
    assert third.requests == 1


async def test_one_unreadable_invoice_is_quarantined_and_its_neighbours_stored() -> None:
    account = MemoryAccount(100)
    account.tick(60)
    account.unreadable = {7: {"created_at": "yesterday"}}
    store = MemoryStore()
    first = await SyncEngine(account.client(), store).run()
    assert first.created == 99  # the neighbours
    assert first.quarantined == [7]
    assert list(first.unreadable) == [7]
    assert first.unreadable[7].startswith("Invoice.created_at: not a datetime")
    assert first.requests == 2  # no retries of a batch that cannot get better
    assert first.pending == []
    second = await SyncEngine(account.client(), store).run()
    assert second.requests == 1  # quarantined: not fetched again at this revision
    account.unreadable = {}
    account.change(7)  # fixed on the service: a new revision lifts the quarantine
    account.tick(60)
    third = await SyncEngine(account.client(), store).run()
    assert (third.created, third.requests) == (1, 2)


async def test_a_revision_that_goes_back_is_taken_from_the_service(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The service restored from a backup: 100 -> 50 with other content. The store takes
    the service's copy (the source of truth) and says so."""
    account = MemoryAccount(3)
    account.tick(60)
    store = MemoryStore()
    await SyncEngine(account.client(), store).run()
    restored = m.Invoice(id=2, revision=int(account.now) - 3600, po_number="from backup")
    account.data[2] = restored
    account.tick(60)
    report = await SyncEngine(account.client(), store).run()
    assert await store.get(2) == restored
    assert (await store.revisions())[2] == restored.revision
    assert report.requests == 2
    assert "lower revision than stored" in caplog.text
    again = await SyncEngine(account.client(), store).run()  # and then it is simply current
    assert (again.requests, again.unchanged) == (1, 3)


async def test_an_id_always_returned_older_than_listed_is_quarantined() -> None:
    """The fetch keeps answering an older revision than the list shows: stored as it is,
    tried again for `max_attempts` runs, then quarantined and reported, not refetched."""
    account = MemoryAccount(150)
    account.tick(60)
    listed_at = int(account.now)
    older = m.Invoice(id=9, revision=listed_at - 100, po_number="stale replica", state="open")
    account.reply = lambda ids, invoices: [older if i.id == 9 else i for i in invoices]
    store = MemoryStore()
    reports = [await SyncEngine(account.client(), store, max_attempts=3).run() for _ in range(5)]
    assert [r.quarantined for r in reports[:3]] == [[], [], [9]]
    assert [r.requests for r in reports[3:]] == [1, 1]  # the list only: 9 is not refetched
    assert reports[3].quarantined == [9]
    assert await store.get(9) == older


class FailingStore(MemoryStore):
    """A store whose first batch write fails (a full disk, a lost connection)."""

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        raise OSError("disk full")


async def test_a_failed_write_stops_the_fetch_phase_and_its_requests() -> None:
    """The engine closes the phase's batches when writing fails: the requests in flight
    are cancelled and no further batch is asked for."""
    account = MemoryAccount(2000)
    account.tick(60)
    before = account.requests_sent
    with pytest.raises(OSError, match="disk full"):
        await SyncEngine(account.client(), FailingStore(), concurrency=4).run()
    sent = account.requests_sent - before
    assert sent <= 1 + 4  # the list, and at most the four batches first in flight
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert others == []
