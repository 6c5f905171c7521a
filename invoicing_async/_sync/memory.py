"""`MemoryStore`: the `Store` protocol in a dict, for tests and short-lived jobs."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from types import TracebackType

from invoicing_async._sync.store import BatchResult, PendingEntry
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

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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

    async def apply_batch(
        self,
        invoices: Sequence[Invoice],
        documents: Sequence[bytes] | None = None,  # noqa: ARG002 - keeps models, not documents
    ) -> BatchResult:
        created: list[int] = []
        updated: list[int] = []
        stale: list[int] = []
        for invoice in invoices:
            if invoice.id is None:
                continue
            current = self.invoices.get(invoice.id)
            revived = invoice.id in self.deleted
            if current is None or revived:
                created.append(invoice.id)
            elif (invoice.revision or 0) >= (current.revision or 0):  # same second: later wins
                updated.append(invoice.id)
            else:
                stale.append(invoice.id)
                continue
            self.invoices[invoice.id] = invoice
            self.deleted.pop(invoice.id, None)
        return BatchResult(created=created, updated=updated, stale=stale)

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
