"""`SyncEngine`: keep a store current with one sync list and batches of 100 fetches."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterator
from typing import IO

from tqdm.auto import tqdm

from invoicing_async import _telemetry
from invoicing_async._sync.fetching import Fetched, FetchPhase, SyncSettings
from invoicing_async._sync.plan import SyncPlan
from invoicing_async._sync.report import BatchCommitted, SyncProgress, SyncReport
from invoicing_async._sync.source import SyncClient
from invoicing_async._sync.store import BatchResult, PendingEntry, Store
from invoicing_async._text import package_logger

__all__ = ["ProgressBar", "SyncEngine"]

logger = package_logger("invoicing_async.sync")


class SyncEngine:
    """Mirror an account's invoices into a `Store` at the lowest request cost.

    A run lists once, diffs against the store, and fetches new and changed invoices in
    batches of 100, `concurrency` at a time, each committed in one transaction: N changed
    invoices cost 1 + ceil(N / 100) requests when nothing fails.

    `progress=True` draws a `tqdm.auto` bar of each run (invoices, requests, budget left);
    `on_progress` gets the same counts after each batch."""

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
        progress: bool = False,
        on_batch: Callable[[BatchCommitted], None] | None = None,
        recheck_within: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        # The engine's requests are background work: they leave the budget's reserve to
        # interactive calls made through the same budget.
        with_options = getattr(client, "with_options", None)
        self.client: SyncClient = with_options(background=True) if with_options else client
        self.store = store
        self.settings = SyncSettings(
            concurrency=concurrency,
            max_attempts=max_attempts,
            max_batch_failures=max_batch_failures,
            max_delete_share=max_delete_share,
            force_deletions=force_deletions,
            quarantine_for=quarantine_for,
            wait_for_budget=wait_for_budget,
            recheck_within=recheck_within,
            clock=clock,
        )
        self.dry_run = dry_run
        self._bar = ProgressBar("sync") if progress else None
        self.on_progress = on_progress
        self.on_batch = on_batch

    @contextlib.contextmanager
    def _drawing(self) -> Iterator[None]:
        """The progress bar, if any, ends with the run (a next run draws a new one)."""
        try:
            yield
        finally:
            if self._bar is not None:
                self._bar.close()

    async def plan(self) -> tuple[SyncPlan, int]:
        """List and diff, without fetching or writing: (plan, requests spent)."""
        before = self.client.requests_sent
        stored, pending = await self.store.revisions(), await self.store.pending()
        plan = await self.settings.plan(self.client, stored, pending)
        return plan, self.client.requests_sent - before

    def fetch_phase(
        self, plan: SyncPlan, report: SyncReport, *, max_attempts: int | None = None
    ) -> FetchPhase:
        """The fetch phase of `plan` with this engine's client and settings: an async
        iterator of checked batches, each to be written before the next is handed out."""
        return FetchPhase(self.client, plan, report, self.settings, max_attempts=max_attempts)

    async def run(self) -> SyncReport:
        """List, diff, then fetch and store what changed; in an OpenTelemetry span
        (`invoicing.sync`) when OpenTelemetry is configured."""
        with _telemetry.span("invoicing.sync") as span, self._drawing():
            report = await self._run()
            if span is not None:
                span.set_attributes(
                    {
                        "invoicing.sync.listed": report.listed,
                        "invoicing.sync.created": report.created,
                        "invoicing.sync.updated": report.updated,
                        "invoicing.sync.deleted": report.deleted,
                        "invoicing.sync.requests": report.requests,
                        "invoicing.sync.complete": report.complete,
                    }
                )
            return report

    async def _run(self) -> SyncReport:
        started = time.monotonic()
        first_request = self.client.requests_sent
        plan, spent = await self.plan()
        if not spent:  # a shared budget is read afresh (the list's settle already did)
            await self.client.budget.refresh()
        report = SyncReport(
            listed=plan.listed,
            unchanged=plan.unchanged,
            planned=len(plan.to_fetch),
            quarantined=list(plan.quarantined),
            deletions_refused=plan.deletions_refused,
            dry_run=self.dry_run,
            needed_requests=plan.batches,
            budget_available=self.client.budget.available_now(background=True),
        )
        if plan.batches > report.budget_available:
            logger.info(
                "the plan needs %d requests, %d are available now: ~%.0fs at the budget's pace",
                plan.batches,
                report.budget_available,
                self.client.budget.time_for(plan.batches, background=True),
            )
        if plan.deletions_refused:
            logger.warning("deletions not applied: %s", plan.deletions_refused)
        if self.dry_run:
            report.pending = list(plan.to_fetch)
            report.deleted = len(plan.to_delete)
            report.eta = self.client.budget.time_for(plan.batches, background=True)
            return self._finished(report, started, first_request)

        await self.store.save_pending(plan.pending)
        if plan.to_delete:
            now = dt.datetime.now(dt.timezone.utc)
            report.deleted = await self.store.apply_deletions(plan.to_delete, now)
            if self.on_batch is not None:
                self.on_batch(BatchCommitted(changed=[], deleted=list(plan.to_delete)))

        phase = self.fetch_phase(plan, report)
        try:
            await self._write_all(phase, first_request)
        finally:
            await self.store.save_pending(phase.remaining_plan())
            report.pending = sorted(phase.queued_ids())
            self._finished(report, started, first_request)
        return report

    def _finished(self, report: SyncReport, started: float, first_request: int) -> SyncReport:
        """`report` with the requests and the time the run took."""
        report.requests = self.client.requests_sent - first_request
        report.seconds = time.monotonic() - started
        return report

    async def _write_all(self, phase: FetchPhase, first_request: int) -> None:
        """Write each batch the phase hands out, in one transaction each."""
        report = phase.report
        async with contextlib.aclosing(phase.batches()) as batches:
            async for fetched in batches:
                result = await self._write(fetched)
                report.created += len(result.created)
                report.updated += len(result.updated)
                report.stale += len(result.stale)
                if self.on_batch is not None:
                    changed_ids = set(result.created) | set(result.updated)
                    changed = [doc.model() for doc in fetched.documents if doc.id in changed_ids]
                    self.on_batch(BatchCommitted(changed=changed, deleted=[]))
                if self.on_progress is not None or self._bar is not None:
                    progress = phase.progress(self.client.requests_sent - first_request)
                    if self.on_progress is not None:
                        self.on_progress(progress)
                    if self._bar is not None:
                        self._bar.update(progress)

    async def _write(self, fetched: Fetched) -> BatchResult:
        if fetched.restored:
            # The service went back (restored from a backup): its copy is the truth, though
            # its revision is older. A tombstone first, so the store takes it as new.
            await self.store.apply_deletions(fetched.restored, dt.datetime.now(dt.timezone.utc))
        return await self.store.apply_documents(fetched.documents)

    async def fetch(self, ids: list[int]) -> SyncReport:
        """Fetch and store these invoices now, without a sync list (e.g. pushed ids), in
        batches of 100; ids the service no longer returns are left for the next full run."""
        started = time.monotonic()
        first_request = self.client.requests_sent
        unique = list(dict.fromkeys(ids))
        stored = await self.store.revisions()
        entries = {i: PendingEntry(id=i, revision=stored.get(i, 0)) for i in unique}
        new = sum(1 for i in unique if i not in stored)
        plan = SyncPlan(
            listed=0, to_fetch=unique, new=new, changed=len(unique) - new, pending=entries
        )
        report = SyncReport(planned=len(unique))
        # One attempt each: an id the service does not return is not retried here.
        phase = self.fetch_phase(plan, report, max_attempts=1)
        with self._drawing():
            await self._write_all(phase, first_request)
        report.quarantined = []
        report.pending = sorted(phase.queued_ids())
        return self._finished(report, started, first_request)


class ProgressBar:
    """Shows invoices fetched, requests spent and the budget left; draws on stderr when
    it is a terminal (a widget in a notebook), or on the `file` given."""

    def __init__(self, label: str, *, file: IO[str] | None = None) -> None:
        self._bar: tqdm[None] | None = None
        self._label = label
        self._file = file

    def update(self, progress: SyncProgress) -> None:
        """Draw the counts after a committed batch (the bar appears at the first)."""
        bar = self._bar
        if bar is None:
            # The bar starts at the first committed batch: counting that batch as done
            # in no time would show a rate of millions of invoices a second.
            bar = self._bar = tqdm(
                total=progress.total,
                initial=progress.done,
                desc=self._label,
                unit="inv",
                leave=True,
                file=self._file,
                disable=None if self._file is None else False,
            )
        else:
            bar.update(progress.done - bar.n)
        bar.set_postfix(requests=progress.requests, budget=progress.budget_left, refresh=False)
        bar.refresh()

    def close(self) -> None:
        """End the bar (the next update starts a new one)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
