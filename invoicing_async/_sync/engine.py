"""`SyncEngine`: keep a store current with one sync list and batches of 100 fetches."""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
import time
from collections.abc import Callable

import attrs

from invoicing_async._resources.invoices import FetchedBatch
from invoicing_async._sync.plan import BATCH_SIZE, SyncPlan, batches_for, plan_sync
from invoicing_async._sync.source import SyncClient
from invoicing_async._sync.store import PendingEntry, Store
from invoicing_async.errors import (
    APIConnectionError,
    DecodeError,
    RateLimitExceeded,
    ServerError,
)
from invoicing_async.models import Invoice

__all__ = ["BatchCommitted", "SyncEngine", "SyncProgress", "SyncReport"]

logger = logging.getLogger("invoicing_async.sync")


@attrs.define
class SyncReport:
    """What a run did. `requests` counts every HTTP request, retries included."""

    listed: int = 0
    created: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    fetched: int = 0
    stale: int = 0
    ignored: int = 0  # invoices in replies that were not asked for, or older duplicates
    rechecks: int = 0  # fetched within their revision's own second: fetched again next run
    requests: int = 0
    batches: int = 0
    planned: int = 0
    needed_requests: int = 0  # fetch requests the plan needs when nothing fails
    budget_available: int = 0  # requests the budget allowed without waiting, at plan time
    pending: list[int] = attrs.field(factory=list)
    quarantined: list[int] = attrs.field(factory=list)
    deletions_refused: str | None = None
    stopped_for_budget: bool = False
    eta: float | None = None
    errors: list[str] = attrs.field(factory=list)
    dry_run: bool = False
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """Everything listed is stored (or quarantined) and nothing stopped the run."""
        return not self.pending and not self.stopped_for_budget and not self.errors

    def to_dict(self) -> dict[str, object]:
        data = attrs.asdict(self)
        data["complete"] = self.complete
        return data


@attrs.frozen
class SyncProgress:
    """Handed to the progress callback after each committed batch."""

    done: int
    total: int
    requests: int
    budget_left: int
    eta: float | None


@attrs.frozen
class BatchCommitted:
    """Handed to `on_batch` after a batch is committed: what changed, what was deleted."""

    changed: list[Invoice]
    deleted: list[int]


class SyncEngine:
    """Mirror an account's invoices into a `Store` at the lowest request cost.

    A run lists once, diffs against the store, and fetches new and changed invoices in
    batches of 100, `concurrency` at a time; each batch is committed in one transaction.
    A run with N changed invoices costs 1 + ceil(N / 100) requests when nothing fails.
    """

    def __init__(
        self,
        client: SyncClient,
        store: Store,
        *,
        concurrency: int = 4,
        max_attempts: int = 3,
        max_batch_failures: int = 3,
        max_delete_share: float = 0.5,
        force_deletions: bool = False,
        quarantine_for: float = 6 * 3600.0,
        wait_for_budget: bool = False,
        dry_run: bool = False,
        on_progress: Callable[[SyncProgress], None] | None = None,
        on_batch: Callable[[BatchCommitted], None] | None = None,
        recheck_within: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client = client
        self.store = store
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.max_batch_failures = max_batch_failures
        self.max_delete_share = max_delete_share
        self.force_deletions = force_deletions
        self.quarantine_for = quarantine_for
        self.wait_for_budget = wait_for_budget
        self.dry_run = dry_run
        self.on_progress = on_progress
        self.on_batch = on_batch
        self.recheck_within = recheck_within
        self.clock = clock

    async def plan(self) -> tuple[SyncPlan, int]:
        """List and diff, without fetching or writing: (plan, requests spent)."""
        before = self.client.requests_sent
        while True:
            try:
                listed = await self.client.invoices.sync_revisions()
                break
            except RateLimitExceeded as exc:
                if not self.wait_for_budget:
                    raise
                await sleep_for_budget(exc)
        plan = plan_sync(
            listed,
            await self.store.revisions(),
            await self.store.pending(),
            max_delete_share=self.max_delete_share,
            force_deletions=self.force_deletions,
            now=self.clock(),
            quarantine_for=self.quarantine_for,
        )
        return plan, self.client.requests_sent - before

    def read_too_early(self, invoice: Invoice, server_time: float | None) -> bool:
        """True when the invoice was read within its revision's own second, so a later
        change in that second would keep the same revision: it must be read again.

        By the reply's `Date` when the server sent one; else within `recheck_within`
        seconds of our own clock (which may differ from the server's).
        """
        revision = invoice.revision or 0
        if server_time is not None:
            return revision >= int(server_time)
        return abs(self.clock() - revision) <= self.recheck_within

    async def run(self) -> SyncReport:
        started = time.monotonic()
        first_request = self.client.requests_sent
        plan, _ = await self.plan()
        report = SyncReport(
            listed=plan.listed,
            unchanged=plan.unchanged,
            planned=len(plan.to_fetch),
            quarantined=list(plan.quarantined),
            deletions_refused=plan.deletions_refused,
            dry_run=self.dry_run,
            needed_requests=plan.requests,
            budget_available=self.client.budget.available_now(),
        )
        if plan.requests > report.budget_available:
            logger.info(
                "the plan needs %d requests, %d are available now: ~%.0fs at the budget's pace",
                plan.requests,
                report.budget_available,
                self.client.budget.time_for(plan.requests),
            )
        if plan.deletions_refused:
            logger.warning("deletions not applied: %s", plan.deletions_refused)
        if self.dry_run:
            report.pending = list(plan.to_fetch)
            report.deleted = len(plan.to_delete)
            report.eta = self.client.budget.time_for(plan.batches)
            report.requests = self.client.requests_sent - first_request
            report.seconds = time.monotonic() - started
            return report

        await self.store.save_pending(plan.pending)
        if plan.to_delete:
            now = dt.datetime.now(dt.timezone.utc)
            report.deleted = await self.store.apply_deletions(plan.to_delete, now)
            if self.on_batch is not None:
                self.on_batch(BatchCommitted(changed=[], deleted=list(plan.to_delete)))

        run = _Run(self, plan, report, first_request)
        try:
            await run.fetch_all()
        finally:
            await self.store.save_pending(run.remaining_plan())
            report.pending = sorted(run.queued_ids())
            report.requests = self.client.requests_sent - first_request
            report.seconds = time.monotonic() - started
        return report

    async def fetch(self, ids: list[int]) -> SyncReport:
        """Fetch and store these invoices now, without a sync list (e.g. pushed ids).

        Ids are de-duplicated and fetched in batches of 100: ceil(N/100) requests.
        Ids the service no longer returns are left for the next full run to tombstone.
        """
        started = time.monotonic()
        first_request = self.client.requests_sent
        unique = list(dict.fromkeys(ids))
        stored = await self.store.revisions()
        entries = {i: PendingEntry(id=i, revision=stored.get(i, 0)) for i in unique}
        plan = SyncPlan(
            listed=0,
            to_fetch=unique,
            new=sum(1 for i in unique if i not in stored),
            changed=sum(1 for i in unique if i in stored),
            unchanged=0,
            to_delete=[],
            deletions_refused=None,
            quarantined=[],
            pending=entries,
        )
        report = SyncReport(planned=len(unique))
        # One attempt each: an id the service does not return is not retried here.
        run = _Run(self, plan, report, first_request, max_attempts=1)
        await run.fetch_all()
        report.quarantined = []
        report.pending = sorted(run.queued_ids())
        report.requests = self.client.requests_sent - first_request
        report.seconds = time.monotonic() - started
        return report


async def sleep_for_budget(exc: RateLimitExceeded) -> None:
    """Wait as long as the budget's refusal says (a minute when it gives no estimate)."""
    wait = exc.retry_after if exc.retry_after is not None else 60.0
    logger.info("budget spent; waiting %.0fs as asked", wait)
    await asyncio.sleep(wait)


def newest_of_requested(ids: list[int], reply: list[Invoice]) -> list[Invoice]:
    """The invoices of a sync-fetch reply worth storing: only ids that were asked for
    (never another account's), and of an id sent twice only its newest revision."""
    wanted = set(ids)
    best: dict[int, Invoice] = {}
    for invoice in reply:
        ident = invoice.id
        if ident is None or ident not in wanted:
            continue
        held = best.get(ident)
        if held is None or (invoice.revision or 0) > (held.revision or 0):
            best[ident] = invoice
    return list(best.values())


class _Run:
    """The mutable state of one run's fetch phase."""

    def __init__(
        self,
        engine: SyncEngine,
        plan: SyncPlan,
        report: SyncReport,
        first_request: int,
        *,
        max_attempts: int | None = None,
    ) -> None:
        self.engine = engine
        self.max_attempts = engine.max_attempts if max_attempts is None else max_attempts
        self.plan = plan
        self.report = report
        self.first_request = first_request
        self.queue: collections.deque[int] = collections.deque(plan.to_fetch)
        self.in_flight: set[int] = set()
        self.entries: dict[int, PendingEntry] = dict(plan.pending)
        self.failures = 0
        self.stop = False
        self.done = 0
        self.rechecks: dict[int, PendingEntry] = {}

    def queued_ids(self) -> set[int]:
        return set(self.queue) | self.in_flight

    def remaining_plan(self) -> dict[int, PendingEntry]:
        """What the next run must still do: the ids not fetched, the quarantined ones, and
        the rechecks of invoices fetched within their revision's own second."""
        keep = self.queued_ids()
        plan = dict(self.rechecks)
        plan.update((i, e) for i, e in self.entries.items() if i in keep or e.quarantined)
        self.report.rechecks = len(self.rechecks)
        return plan

    async def fetch_all(self) -> None:
        workers = [asyncio.ensure_future(self._worker()) for _ in range(self.engine.concurrency)]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    def _next_batch(self) -> list[int]:
        size = min(BATCH_SIZE, len(self.queue))
        ids = [self.queue.popleft() for _ in range(size)]
        self.in_flight.update(ids)
        return ids

    def _give_back(self, ids: list[int]) -> None:
        self.in_flight.difference_update(ids)
        self.queue.extendleft(reversed(ids))

    async def _worker(self) -> None:
        engine = self.engine
        client = engine.client
        while self.queue and not self.stop:
            ids = self._next_batch()
            try:
                batch = await client.invoices.fetch_batch(ids)
            except RateLimitExceeded as exc:
                self._give_back(ids)
                if engine.wait_for_budget:
                    await sleep_for_budget(exc)
                    continue
                self.stop = True
                self.report.stopped_for_budget = True
                self.report.eta = client.budget.time_for(batches_for(len(self.queue)))
                return
            except (APIConnectionError, ServerError, DecodeError) as exc:
                self._give_back(ids)
                self.failures += 1
                self.report.errors.append(f"batch of {len(ids)}: {exc}")
                logger.warning(
                    "sync fetch failed (%d/%d): %s", self.failures, engine.max_batch_failures, exc
                )
                if self.failures >= engine.max_batch_failures:
                    self.stop = True
                    return
                continue
            await self._commit(ids, batch)

    async def _commit(self, ids: list[int], batch: FetchedBatch) -> None:
        engine = self.engine
        reply = batch.invoices
        invoices = newest_of_requested(ids, reply)
        if len(invoices) != len(reply):
            self.report.ignored += len(reply) - len(invoices)
            logger.warning(
                "sync fetch of %d ids answered %d invoices: kept the %d asked for",
                len(ids),
                len(reply),
                len(invoices),
            )
        result = await engine.store.apply_batch(invoices)
        for invoice in invoices:
            if invoice.id is not None and engine.read_too_early(invoice, batch.server_time):
                self.rechecks[invoice.id] = PendingEntry(
                    id=invoice.id, revision=invoice.revision or 0
                )
        self.in_flight.difference_update(ids)
        report = self.report
        report.batches += 1
        report.fetched += len(invoices)
        report.created += len(result.created)
        report.updated += len(result.updated)
        report.stale += len(result.stale)
        returned = {inv.id for inv in invoices}
        for ident in returned:
            self.entries.pop(ident or 0, None)
        self.done += len(returned & set(ids))
        for ident in ids:
            if ident in returned:
                continue
            entry = self.entries.get(ident)
            if entry is None:
                continue
            attempts = entry.attempts + 1
            if attempts >= self.max_attempts:
                self.entries[ident] = attrs.evolve(
                    entry, attempts=attempts, quarantined=True, since=time.time()
                )
                report.quarantined.append(ident)
                self.done += 1
                logger.warning(
                    "invoice %d listed but not returned %d times: quarantined "
                    "until its revision changes or quarantine_for passes",
                    ident,
                    attempts,
                )
            else:
                self.entries[ident] = attrs.evolve(entry, attempts=attempts)
                self.queue.append(ident)  # fills the spare room of the last batch
        if engine.on_batch is not None:
            changed_ids = set(result.created) | set(result.updated)
            changed = [inv for inv in invoices if inv.id in changed_ids]
            engine.on_batch(BatchCommitted(changed=changed, deleted=[]))
        if engine.on_progress is not None:
            budget = engine.client.budget
            remaining = batches_for(len(self.queue))
            engine.on_progress(
                SyncProgress(
                    done=self.done,
                    total=len(self.plan.to_fetch),
                    requests=engine.client.requests_sent - self.first_request,
                    budget_left=budget.snapshot().remaining,
                    eta=budget.time_for(remaining) if remaining else 0.0,
                )
            )
