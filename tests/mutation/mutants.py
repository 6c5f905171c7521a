"""Realistic bugs seeded into copies of `MemoryStore` and `SQLiteStore` (subclasses that
override a method or two), each with the Store conformance suite run against it
(`TestName` classes); `store_mutations.py` runs them. Not collected by a plain `pytest`
run (the file is not `test_*.py`)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from hypothesis import Phase, settings

from invoicing_async._models.payloads import dump_model
from invoicing_async._resources.decoding import own_pool
from invoicing_async._sync.store import BatchResult, PendingEntry
from invoicing_async.models import Invoice
from invoicing_async.sync import InvoiceDocument, MemoryStore, SQLiteStore, Store
from invoicing_async.testing import StoreSuite

T = TypeVar("T")

# A failing example is enough to call a bug caught: no shrinking, which would wait out the
# patience once per step against a store that hangs. Loaded after the suite's conftest.
settings.register_profile(
    "mutation", parent=settings(), phases=[Phase.explicit, Phase.generate], database=None
)
settings.load_profile("mutation")


def with_document(doc: InvoiceDocument, document: bytes) -> InvoiceDocument:
    return InvoiceDocument(
        doc.id, doc.revision, doc.invoice_number, doc.state, doc.contact_id, document=document
    )


# -- bugs in a store that keeps models ------------------------------------------------------


class LostDelete(MemoryStore):
    """apply_deletions counts the ids but marks none deleted."""

    async def apply_deletions(self, ids: Iterable[int], at: dt.datetime) -> int:
        return sum(1 for i in ids if i in self.invoices and i not in self.deleted)


class DeleteCountsTombstones(MemoryStore):
    """a second deletion of an id counts it again."""

    async def apply_deletions(self, ids: Iterable[int], at: dt.datetime) -> int:
        ids = list(ids)
        await super().apply_deletions(ids, at)
        return sum(1 for i in ids if i in self.invoices)


class DeleteCountsUnknown(MemoryStore):
    """ids never stored are counted as deleted."""

    async def apply_deletions(self, ids: Iterable[int], at: dt.datetime) -> int:
        ids = list(ids)
        await super().apply_deletions(ids, at)
        return len(set(ids) - set(self.deleted)) + sum(1 for i in set(ids) if i in self.deleted)


class RevisionOffByOne(MemoryStore):
    """revisions() reports each revision one higher."""

    async def revisions(self) -> dict[int, int]:
        return {i: r + 1 for i, r in (await super().revisions()).items()}


class EqualRevisionIsStale(MemoryStore):
    """a fetch of the same revision is refused (> instead of >=)."""

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        held = {
            d.id: d
            for d in documents
            if d.id is not None
            and d.id in self.invoices
            and d.id not in self.deleted
            and (self.invoices[d.id].revision or 0) == (d.revision or 0)
        }
        result = await super().apply_documents([d for d in documents if d.id not in held])
        return BatchResult(result.created, result.updated, [*result.stale, *held])


class OlderOverwrites(MemoryStore):
    """a stale document is reported stale but written anyway."""

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        result = await super().apply_documents(documents)
        for doc in documents:
            if doc.id in result.stale:
                self.invoices[doc.id] = doc.model()
        return result


class TombstoneNotRevived(MemoryStore):
    """a deleted invoice written again is reported created but stays deleted."""

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        gone = dict(self.deleted)
        result = await super().apply_documents(documents)
        self.deleted.update({i: at for i, at in gone.items() if i in result.created})
        return result


class RevivalReportedUpdated(MemoryStore):
    """a tombstone written again is reported updated, not created."""

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        gone = set(self.deleted)
        result = await super().apply_documents(documents)
        back = [i for i in result.created if i in gone]
        created = [i for i in result.created if i not in gone]
        return BatchResult(created, [*result.updated, *back], result.stale)


class CreatedReportedUpdated(MemoryStore):
    """every written invoice is reported updated."""

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        result = await super().apply_documents(documents)
        return BatchResult([], [*result.created, *result.updated], result.stale)


class LastOfBatchDropped(MemoryStore):
    """a loop bound off by one: the last document of each batch is neither written nor told."""

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        return await super().apply_documents(documents[:-1])


class QuarantineForgotten(MemoryStore):
    """the plan is saved without its quarantine flags."""

    async def save_pending(self, entries: Mapping[int, PendingEntry]) -> None:
        await super().save_pending(
            {i: PendingEntry(e.id, e.revision, e.attempts) for i, e in entries.items()}
        )


class AttemptsReset(MemoryStore):
    """fetch attempts are not kept."""

    async def save_pending(self, entries: Mapping[int, PendingEntry]) -> None:
        await super().save_pending(
            {
                i: PendingEntry(e.id, e.revision, 0, e.quarantined, e.since)
                for i, e in entries.items()
            }
        )


class QuarantineTimeLost(MemoryStore):
    """when an id was quarantined is not kept (it would never be let out)."""

    async def save_pending(self, entries: Mapping[int, PendingEntry]) -> None:
        await super().save_pending(
            {
                i: PendingEntry(e.id, e.revision, e.attempts, e.quarantined)
                for i, e in entries.items()
            }
        )


class PlanMergedNotReplaced(MemoryStore):
    """a saved plan is merged into the last one instead of replacing it."""

    async def save_pending(self, entries: Mapping[int, PendingEntry]) -> None:
        await super().save_pending({**(await self.pending()), **entries})


class PlanDroppedOnWrite(MemoryStore):
    """every write clears the whole plan, not just the ids written."""

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        result = await super().apply_documents(documents)
        if documents:
            await self.save_pending({})
        return result


class IterationInInsertionOrder(MemoryStore):
    """iter_invoices() yields in the order written, not by id."""

    async def iter_invoices(self) -> AsyncIterator[Invoice]:
        for ident, invoice in self.invoices.items():
            if ident not in self.deleted:
                yield invoice


class IterationShowsTombstones(MemoryStore):
    """iter_invoices() yields deleted invoices too."""

    async def iter_invoices(self) -> AsyncIterator[Invoice]:
        for ident in sorted(self.invoices):
            yield self.invoices[ident]


class GetShowsTombstones(MemoryStore):
    """get() returns a deleted invoice."""

    async def get(self, invoice_id: int) -> Invoice | None:
        return self.invoices.get(invoice_id)


# -- bugs in a store that keeps documents ---------------------------------------------------


class DocumentTruncated(SQLiteStore):
    """documents cut at 64 KiB (a column type too small)."""

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        return await super().apply_documents(
            [with_document(d, d.document[:65535]) for d in documents]
        )


class DocumentReencoded(SQLiteStore):
    """each document written again from its model, not as the bytes given."""

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        return await super().apply_documents(
            [with_document(d, dump_model(d.model(), "json", mode="document")) for d in documents]
        )


class LockNotReleased(SQLiteStore):
    """the store's lock is taken for each call and never given back."""

    async def _run(self, fn: Any, doing: str = "cannot use") -> Any:
        await self._lock.acquire()
        return await asyncio.get_running_loop().run_in_executor(own_pool("invoicing-sqlite", 4), fn)


class NoLock(SQLiteStore):
    """calls are not serialized: two share the connection at once."""

    async def _run(self, fn: Any, doing: str = "cannot use") -> Any:
        return await asyncio.get_running_loop().run_in_executor(own_pool("invoicing-sqlite", 4), fn)


class PagingSkipsARow(SQLiteStore):
    """each page starts one id past the last one read (`>` on id + 1)."""

    async def _pages(self, page: int) -> AsyncIterator[list[tuple[int, bytes]]]:
        after = -(2**63)
        while True:
            rows = await self._rows("id > ?", (after,), limit=page)
            if rows:
                yield rows
            if len(rows) < page:
                return
            after = rows[-1][0] + 1


class RevisionsShowTombstones(SQLiteStore):
    """revisions() forgets the `deleted_at IS NULL` filter."""

    async def revisions(self) -> dict[int, int]:
        return await self._run(lambda: dict(self._db.execute("SELECT id, revision FROM invoices")))


class PlanKeptInMemory(SQLiteStore):
    """the plan is kept on the object only: the next run never sees it."""

    plan: dict[int, PendingEntry]

    async def pending(self) -> dict[int, PendingEntry]:
        return dict(getattr(self, "plan", {}))

    async def save_pending(self, entries: Mapping[int, PendingEntry]) -> None:
        self.plan = dict(entries)


class OutcomeOfTheLastBatchCached(SQLiteStore):
    """revisions() answered from a copy taken at the first call, never refreshed."""

    cached: dict[int, int] | None = None

    async def revisions(self) -> dict[int, int]:
        if self.cached is None:
            self.cached = await super().revisions()
        return dict(self.cached)


class ReopenLosesDeletions(SQLiteStore):
    """deletions kept on the object, not in the file."""

    gone: set[int]

    async def apply_deletions(self, ids: Iterable[int], at: dt.datetime) -> int:
        self.gone = getattr(self, "gone", set())
        live = await super().revisions()
        fresh = {i for i in ids if i in live and i not in self.gone}
        self.gone |= fresh
        return len(fresh)

    async def revisions(self) -> dict[int, int]:
        gone: set[int] = getattr(self, "gone", set())
        return {i: r for i, r in (await super().revisions()).items() if i not in gone}

    async def get(self, invoice_id: int) -> Invoice | None:
        return None if invoice_id in getattr(self, "gone", set()) else await super().get(invoice_id)

    async def _rows(
        self, where: str, args: tuple[object, ...], limit: int | None = None
    ) -> list[tuple[int, bytes]]:
        gone: set[int] = getattr(self, "gone", set())
        return [r for r in await super()._rows(where, args, limit) if r[0] not in gone]

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        result = await super().apply_documents(documents)
        getattr(self, "gone", set()).difference_update(result.created)
        return result


MUTANTS: list[type[Store]] = [
    LostDelete,
    DeleteCountsTombstones,
    DeleteCountsUnknown,
    RevisionOffByOne,
    EqualRevisionIsStale,
    OlderOverwrites,
    TombstoneNotRevived,
    RevivalReportedUpdated,
    CreatedReportedUpdated,
    LastOfBatchDropped,
    QuarantineForgotten,
    AttemptsReset,
    QuarantineTimeLost,
    PlanMergedNotReplaced,
    PlanDroppedOnWrite,
    IterationInInsertionOrder,
    IterationShowsTombstones,
    GetShowsTombstones,
    DocumentTruncated,
    DocumentReencoded,
    LockNotReleased,
    NoLock,
    PagingSkipsARow,
    RevisionsShowTombstones,
    PlanKeptInMemory,
    OutcomeOfTheLastBatchCached,
    ReopenLosesDeletions,
]


class Mutant(StoreSuite):
    """The suite against one seeded bug; a hang shows within `patience` (these stores answer
    in milliseconds)."""

    store_class: ClassVar[type[Store]]
    patience: ClassVar[float] = 1.0

    async def make_store(self) -> Store:
        if issubclass(self.store_class, SQLiteStore):
            return self.store_class(self.tmp_path / f"{self.fresh_name()}.db")
        return self.store_class()

    async def reopen_store(self, store: Store) -> Store | None:
        if isinstance(store, SQLiteStore):
            return type(store)(store.path)
        return None


for _store in (MemoryStore, SQLiteStore, *MUTANTS):
    _name = f"Test{_store.__name__}"
    globals()[_name] = type(_name, (Mutant,), {"store_class": _store})
