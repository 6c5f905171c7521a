"""The fetch phase of a sync, one for every consumer (`SyncEngine`, the dlt source): batches
of 100 in flight, handed out one by one, replies checked, unreadable invoices quarantined."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncGenerator, Callable, Mapping

import attrs

from invoicing_async import _telemetry
from invoicing_async._models.documents import MemberError
from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._resources.invoices import FetchedBatch
from invoicing_async._sync.plan import BATCH_SIZE, SyncPlan, batches_for, plan_sync
from invoicing_async._sync.report import SyncProgress, SyncReport
from invoicing_async._sync.source import SyncClient
from invoicing_async._sync.store import PendingEntry, newest
from invoicing_async._text import package_logger
from invoicing_async.errors import APIConnectionError, DecodeError, RateLimitExceeded, ServerError

__all__ = ["FetchPhase", "Fetched", "SyncSettings", "newest_of_requested", "unreadable_ids"]

logger = package_logger("invoicing_async.sync")


@attrs.frozen
class SyncSettings:
    """How a sync plans and fetches; the same rules for every consumer of the phase."""

    concurrency: int = 4
    max_attempts: int = 3
    max_batch_failures: int = 3
    max_delete_share: float = 0.5
    force_deletions: bool = False
    quarantine_for: float = 6 * 3600.0
    wait_for_budget: bool = False
    recheck_within: float = 5.0
    clock: Callable[[], float] = time.time
    #: Documents keep their checked values (`InvoiceDocument.values()`): for a consumer that
    #: reads every value (the dlt source), not a store (they would be held for nothing).
    keep_values: bool = False

    def read_too_early(self, revision: int | None, server_time: float | None) -> bool:
        """True when the invoice was read within its revision's own second (by the reply's `Date`,
        else our clock within `recheck_within`): a later change would keep the revision."""
        read = revision or 0
        if server_time is not None:
            return read >= int(server_time)
        return abs(self.clock() - read) <= self.recheck_within

    async def plan(
        self, client: SyncClient, stored: Mapping[int, int], pending: Mapping[int, PendingEntry]
    ) -> SyncPlan:
        """One sync list (waiting for the budget if asked), diffed against `stored`."""
        while True:
            try:
                listed = await client.invoices.sync_revisions()
                break
            except RateLimitExceeded as exc:
                if not self.wait_for_budget:
                    raise
                await sleep_for_budget(exc)
        return plan_sync(
            listed,
            stored,
            pending,
            max_delete_share=self.max_delete_share,
            force_deletions=self.force_deletions,
            now=self.clock(),
            quarantine_for=self.quarantine_for,
        )


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
    return newest(d for d in reply if d.id in wanted)


def unreadable_ids(
    ids: list[int], returned: set[int | None], unreadable: list[MemberError]
) -> tuple[dict[int, str], list[int]]:
    """({id: why} of the members that could not be read, ids neither returned nor unreadable).
    A member whose id cannot be read is the id its batch lacks, when the counts match."""
    asked = set(ids)
    named = {e.ident: e.error for e in unreadable if e.ident is not None and e.ident in asked}
    nameless = [e.error for e in unreadable if e.ident is None or e.ident not in asked]
    missing = [i for i in ids if i not in returned and i not in named]
    if nameless and len(nameless) == len(missing):
        named.update(zip(missing, nameless, strict=True))
        missing = []
    return named, missing


@attrs.frozen
class Fetched:
    """One checked reply: the invoices asked for (the newest of an id sent twice), and
    `restored`, those the service took back to an older revision (write them over)."""

    documents: list[InvoiceDocument]
    restored: list[int]


class FetchPhase:
    """One run's fetch phase: iterate `batches()` and write each batch before asking for the
    next; close the iterator (`contextlib.aclosing`) to cancel the requests in flight."""

    def __init__(
        self,
        client: SyncClient,
        plan: SyncPlan,
        report: SyncReport,
        settings: SyncSettings,
        *,
        max_attempts: int | None = None,
    ) -> None:
        self.client = client
        self.settings = settings
        self.max_attempts = settings.max_attempts if max_attempts is None else max_attempts
        self.plan = plan
        self.report = report
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

    def progress(self, requests: int) -> SyncProgress:
        """Where the phase stands, with `requests` spent so far."""
        budget = self.client.budget
        remaining = batches_for(len(self.queue))
        return SyncProgress(
            done=self.done,
            total=len(self.plan.to_fetch),
            requests=requests,
            budget_left=budget.snapshot().remaining,
            eta=budget.time_for(remaining, background=True) if remaining else 0.0,
        )

    async def batches(self) -> AsyncGenerator[Fetched, None]:
        """The checked batches, as they arrive; each written before the next."""
        handed: asyncio.Queue[tuple[Fetched, asyncio.Future[None]] | None] = asyncio.Queue()
        workers = [
            asyncio.ensure_future(self._worker(handed)) for _ in range(self.settings.concurrency)
        ]

        async def all_done() -> None:
            try:
                await asyncio.gather(*workers)
            finally:
                handed.put_nowait(None)

        finished = asyncio.ensure_future(all_done())
        try:
            while (item := await handed.get()) is not None:
                fetched, written = item
                yield fetched
                written.set_result(None)
            await finished
        finally:
            for task in [*workers, finished]:
                task.cancel()
            await asyncio.gather(*workers, finished, return_exceptions=True)

    def quarantine(self, reasons: Mapping[int, str]) -> None:
        """Quarantine invoices that cannot be read or kept ({id: why}), so that they neither block
        their batch nor cost requests run after run."""
        for ident, error in reasons.items():
            self.done += ident in self.entries  # not counted yet: never returned
            entry = self.entries.get(ident) or self.plan.pending.get(ident)
            if entry is not None:
                self.report.unreadable[ident] = error
                self._give_up(self.entries, entry, self.max_attempts, f"cannot be kept ({error})")

    def _give_up(
        self, held: dict[int, PendingEntry], entry: PendingEntry, attempts: int, why: str
    ) -> None:
        """Quarantine `entry` in `held`: skipped until its revision changes or
        `quarantine_for` passes (no refetching forever)."""
        held[entry.id] = _quarantined(entry, attempts)
        self.report.quarantined.append(entry.id)
        logger.warning("invoice %d %s: quarantined", entry.id, why)

    def _next_batch(self) -> list[int]:
        size = min(BATCH_SIZE, len(self.queue))
        ids = [self.queue.popleft() for _ in range(size)]
        self.in_flight.update(ids)
        return ids

    def _give_back(self, ids: list[int]) -> None:
        self.in_flight.difference_update(ids)
        self.queue.extendleft(reversed(ids))

    async def _worker(
        self, handed: asyncio.Queue[tuple[Fetched, asyncio.Future[None]] | None]
    ) -> None:
        while self.queue and not self.stop:
            ids = self._next_batch()
            with _telemetry.span("invoicing.sync.batch", {"invoicing.batch.size": len(ids)}):
                batch = await self._fetch(ids)
                if batch is None:
                    continue
                written = asyncio.get_running_loop().create_future()
                handed.put_nowait((self._check(ids, batch), written))
                await written
                self.in_flight.difference_update(ids)

    async def _fetch(self, ids: list[int]) -> FetchedBatch | None:
        """One sync-fetch request; None when it failed (the ids are queued again)."""
        try:
            return await self.client.invoices.fetch_batch(
                ids, keep_values=self.settings.keep_values
            )
        except RateLimitExceeded as exc:
            self._give_back(ids)
            if self.settings.wait_for_budget:
                await sleep_for_budget(exc)
                return None
            self.stop = True
            self.report.stopped_for_budget = True
            left = batches_for(len(self.queue))
            self.report.eta = self.client.budget.time_for(left, background=True)
            return None
        except (APIConnectionError, ServerError, DecodeError) as exc:
            self._give_back(ids)
            self.failures += 1
            self.report.errors.append(f"batch of {len(ids)}: {exc}")
            limit = self.settings.max_batch_failures
            logger.warning("sync fetch failed (%d/%d): %s", self.failures, limit, exc)
            self.stop = self.stop or self.failures >= limit
            return None

    def _note_behind(self, kept: list[InvoiceDocument]) -> None:
        """Invoices returned at an older revision than listed: stored, and fetched again
        next run; quarantined after `max_attempts` runs."""
        for doc in kept:
            entry = self.entries.get(doc.id or 0)
            if entry is not None and (doc.revision or 0) < entry.revision:
                why = f"returned older than listed ({doc.revision} < {entry.revision})"
                self._try_again(self.behind, entry, why)

    def _retry_missing(self, missing: list[int]) -> None:
        """Ids asked for but not returned: again in a later batch, quarantined after
        `max_attempts`."""
        for ident in missing:
            entry = self.entries.get(ident)
            if entry is None:
                continue
            if self._try_again(self.entries, entry, "not returned"):
                self.queue.append(ident)  # fills the spare room of the last batch
            else:
                self.done += 1

    def _try_again(self, held: dict[int, PendingEntry], entry: PendingEntry, why: str) -> bool:
        """Count one more failed attempt of `entry` in `held`; False when that was the
        last (`max_attempts`) and it is quarantined."""
        attempts = entry.attempts + 1
        if attempts >= self.max_attempts:
            self._give_up(held, entry, attempts, f"{why} {attempts} times")
            return False
        held[entry.id] = attrs.evolve(entry, attempts=attempts)
        return True

    def _check(self, ids: list[int], batch: FetchedBatch) -> Fetched:
        """Keep what was asked for, and account for every id of the batch."""
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
        restored = [d.id for d in kept if d.id is not None and d.id in self.regressed]
        if restored:
            logger.warning(
                "invoices %s listed at a lower revision than stored: the service's copies "
                "taken (restored from a backup?)",
                restored,
            )
        if self.plan.listed:
            self._note_behind(kept)
        for doc in kept:
            if doc.id is not None and self.settings.read_too_early(doc.revision, batch.server_time):
                self.rechecks[doc.id] = PendingEntry(id=doc.id, revision=doc.revision or 0)
        self.report.batches += 1
        self.report.fetched += len(kept)
        returned = {doc.id for doc in kept}
        for ident in returned:
            self.entries.pop(ident or 0, None)
        self.done += len(returned & set(ids))
        unreadable, missing = unreadable_ids(ids, returned, batch.unreadable)
        self.quarantine(unreadable)
        self._retry_missing(missing)
        return Fetched(documents=kept, restored=restored)
