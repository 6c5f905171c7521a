"""`MemoryStore`: the `Store` protocol in a dict of models, for tests and short-lived jobs."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence

from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._sync.store import BatchResult, PendingEntry, WriteOutcome, write_outcome
from invoicing_async.models import Invoice

__all__ = ["MemoryStore"]


class MemoryStore:
    """Invoices, tombstones and the pending plan, kept in memory."""

    def __init__(self) -> None:
        self.invoices: dict[int, Invoice] = {}
        self.deleted: dict[int, dt.datetime] = {}
        self._pending: dict[int, PendingEntry] = {}

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def revisions(self) -> dict[int, int]:
        return {i: inv.revision or 0 for i, inv in self.invoices.items() if i not in self.deleted}

    async def get(self, invoice_id: int) -> Invoice | None:
        if invoice_id in self.deleted:
            return None
        return self.invoices.get(invoice_id)

    async def iter_invoices(self) -> AsyncIterator[Invoice]:
        """Every live invoice, by id."""
        for ident in sorted(self.invoices):
            if ident not in self.deleted:
                yield self.invoices[ident]

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        """Keep each invoice as its model (`document.model()`, decoded once)."""
        outcomes: dict[WriteOutcome, list[int]] = {"created": [], "updated": [], "stale": []}
        for document in documents:
            ident = document.id
            if ident is None:
                continue
            current = self.invoices.get(ident)
            stored = None if current is None else current.revision or 0
            outcome = write_outcome(document.revision or 0, stored, deleted=ident in self.deleted)
            outcomes[outcome].append(ident)
            if outcome != "stale":
                self.invoices[ident] = document.model()
                self.deleted.pop(ident, None)
        return BatchResult(**outcomes)

    async def apply_deletions(self, ids: Iterable[int], at: dt.datetime) -> int:
        count = 0
        for ident in ids:
            if ident in self.invoices and ident not in self.deleted:
                self.deleted[ident] = at
                count += 1
        return count

    async def pending(self) -> dict[int, PendingEntry]:
        return dict(self._pending)

    async def save_pending(self, entries: Mapping[int, PendingEntry]) -> None:
        self._pending = dict(entries)

    async def close(self) -> None:
        return None
