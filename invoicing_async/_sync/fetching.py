"""The fetch phase of a run: batches of 100 in flight, committed one by one, with the
replies checked, unreadable invoices quarantined, missing ids retried a bounded number
of times, and a clean stop when the budget is spent."""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
import time
from typing import TYPE_CHECKING

import attrs

from invoicing_async import _telemetry
from invoicing_async._models.documents import MemberError
from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._resources.invoices import FetchedBatch
from invoicing_async._sync.plan import BATCH_SIZE, SyncPlan, batches_for
from invoicing_async._sync.report import BatchCommitted, SyncProgress, SyncReport
from invoicing_async._sync.store import PendingEntry, write_outcome
from invoicing_async.errors import (
    APIConnectionError,
    DecodeError,
    RateLimitExceeded,
    ServerError,
)

if TYPE_CHECKING:
    from invoicing_async._sync.engine import SyncEngine

__all__ = ["FetchRun", "newest_of_requested", "sleep_for_budget", "unreadable_ids"]

logger = logging.getLogger("invoicing_async.sync")


async def sleep_for_budget(exc: RateLimitExceeded) -> None:
    """Wait as long as the budget's refusal says (a minute when it gives no estimate)."""
    wait = exc.retry_after if exc.retry_after is not None else 60.0
    logger.info("budget spent; waiting %.0fs as asked", wait)
    await asyncio.sleep(wait)


def _quarantined(entry: PendingEntry, attempts: int) -> PendingEntry:
    return attrs.evolve(entry, attempts=attempts, quarantined=True, since=time.time())


def newest_of_requested(ids: list[int], reply: list[InvoiceDocument]) -> list[InvoiceDocument]:
    """The invoices of a sync-fetch reply worth storing: only ids that were asked for
    (never another account's), and of an id sent twice the one `write_outcome` keeps."""
    wanted = set(ids)
    best: dict[int, InvoiceDocument] = {}
    for invoice in reply:
        ident = invoice.id
        if ident is None or ident not in wanted:
            continue
        held = best.get(ident)
        stored = None if held is None else held.revision or 0
        if write_outcome(invoice.revision or 0, stored) != "stale":
            best[ident] = invoice
    return list(best.values())


def unreadable_ids(
    ids: list[int], returned: set[int | None], unreadable: list[MemberError]
) -> tuple[dict[int, str], list[int]]:
    """({id: why} of the members that could not be read, ids neither returned nor
    unreadable). A member whose id itself cannot be read (past 64 bits) is the id its
    batch lacks when exactly as many ids are missing as members are nameless: the
    service answers every id asked for, so those are they."""
    asked = set(ids)
    named = {e.ident: e.error for e in unreadable if e.ident is not None and e.ident in asked}
    nameless = [e.error for e in unreadable if e.ident is None or e.ident not in asked]
    missing = [i for i in ids if i not in returned and i not in named]
    if nameless and len(nameless) == len(missing):
        named.update(zip(missing, nameless, strict=True))
        missing = []
    return named, missing


class FetchRun:
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
        self.regressed = set(plan.regressed)
        # Returned older than listed, run after run: kept in the plan with their attempts.
        self.behind: dict[int, PendingEntry] = {}

    def queued_ids(self) -> set[int]:
        return set(self.queue) | self.in_flight

    def remaining_plan(self) -> dict[int, PendingEntry]:
        """What the next run must still do: the ids not fetched, the quarantined ones, and
        the rechecks of invoices fetched within their revision's own second."""
        keep = self.queued_ids()
        plan = dict(self.rechecks)
        plan.update(self.behind)
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
        while self.queue and not self.stop:
            ids = self._next_batch()
            with _telemetry.span("invoicing.sync.batch", {"invoicing.batch.size": len(ids)}):
                if not await self._batch(ids):
                    return

    async def _batch(self, ids: list[int]) -> bool:
        """Fetch and commit one batch; False when this worker should stop."""
        engine = self.engine
        client = engine.client
        try:
            batch = await client.invoices.fetch_batch(ids)
        except RateLimitExceeded as exc:
            self._give_back(ids)
            if engine.wait_for_budget:
                await sleep_for_budget(exc)
                return True
            self.stop = True
            self.report.stopped_for_budget = True
            left = batches_for(len(self.queue))
            self.report.eta = client.budget.time_for(left, background=True)
            return False
        except (APIConnectionError, ServerError, DecodeError) as exc:
            self._give_back(ids)
            self.failures += 1
            self.report.errors.append(f"batch of {len(ids)}: {exc}")
            logger.warning(
                "sync fetch failed (%d/%d): %s", self.failures, engine.max_batch_failures, exc
            )
            if self.failures >= engine.max_batch_failures:
                self.stop = True
                return False
            return True
        await self._commit(ids, batch)
        return True

    def _quarantine_unreadable(self, unreadable: dict[int, str]) -> None:
        """Invoices the service sent but we cannot read: quarantined at once, named with
        the field, so they neither block their batch nor cost requests run after run."""
        for ident, error in unreadable.items():
            entry = self.entries.get(ident)
            if entry is None:
                continue
            self.entries[ident] = _quarantined(entry, self.max_attempts)
            self.report.quarantined.append(ident)
            self.report.unreadable[ident] = error
            self.done += 1
            logger.warning(
                "invoice %d cannot be read (%s): quarantined until its revision "
                "changes or quarantine_for passes",
                ident,
                error,
            )

    def _note_behind(self, kept: list[InvoiceDocument]) -> None:
        """Invoices returned at an older revision than listed: stored, and fetched again
        next run; quarantined after `max_attempts` runs (no refetching forever)."""
        for doc in kept:
            entry = self.entries.get(doc.id or 0)
            if entry is None or (doc.revision or 0) >= entry.revision:
                continue
            attempts = entry.attempts + 1
            if attempts >= self.max_attempts:
                self.behind[entry.id] = _quarantined(entry, attempts)
                self.report.quarantined.append(entry.id)
                logger.warning(
                    "invoice %d returned older than listed (%d < %d) %d times: quarantined",
                    entry.id,
                    doc.revision or 0,
                    entry.revision,
                    attempts,
                )
            else:
                self.behind[entry.id] = attrs.evolve(entry, attempts=attempts)

    def _retry_missing(self, missing: list[int]) -> None:
        """Ids asked for but not returned: again in a later batch, quarantined after
        `max_attempts` (no endless refetching)."""
        for ident in missing:
            entry = self.entries.get(ident)
            if entry is None:
                continue
            attempts = entry.attempts + 1
            if attempts >= self.max_attempts:
                self.entries[ident] = _quarantined(entry, attempts)
                self.report.quarantined.append(ident)
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

    async def _commit(self, ids: list[int], batch: FetchedBatch) -> None:
        engine = self.engine
        reply = batch.documents
        kept = newest_of_requested(ids, reply)
        if len(kept) != len(reply):
            self.report.ignored += len(reply) - len(kept)
            logger.warning(
                "sync fetch of %d ids answered %d invoices: kept the %d asked for",
                len(ids),
                len(reply),
                len(kept),
            )
        restored = [d.id for d in kept if d.id in self.regressed]
        if restored:
            # The service went back (restored from a backup): its copy is the truth, though
            # its revision is older. A tombstone first, so the store takes it as new.
            logger.warning(
                "invoices %s listed at a lower revision than stored: the service's copies "
                "taken (restored from a backup?)",
                restored,
            )
            await engine.store.apply_deletions(restored, dt.datetime.now(dt.timezone.utc))
        result = await engine.store.apply_documents(kept)
        if self.plan.listed:
            self._note_behind(kept)
        for doc in kept:
            if doc.id is not None and engine.read_too_early(doc.revision, batch.server_time):
                self.rechecks[doc.id] = PendingEntry(id=doc.id, revision=doc.revision or 0)
        self.in_flight.difference_update(ids)
        report = self.report
        report.batches += 1
        report.fetched += len(kept)
        report.created += len(result.created)
        report.updated += len(result.updated)
        report.stale += len(result.stale)
        returned = {doc.id for doc in kept}
        for ident in returned:
            self.entries.pop(ident or 0, None)
        self.done += len(returned & set(ids))
        unreadable, missing = unreadable_ids(ids, returned, batch.unreadable)
        self._quarantine_unreadable(unreadable)
        self._retry_missing(missing)
        if engine.on_batch is not None:
            changed_ids = set(result.created) | set(result.updated)
            changed = [doc.model() for doc in kept if doc.id in changed_ids]
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
                    eta=budget.time_for(remaining, background=True) if remaining else 0.0,
                )
            )
