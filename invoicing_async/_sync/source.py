"""What the sync engine needs from a client: the `SyncClient` protocol."""

from __future__ import annotations

import builtins
from typing import Protocol

from invoicing_async._budget.budget import RateBudget
from invoicing_async._resources.invoices import FetchedBatch
from invoicing_async.models import SyncRevisions

__all__ = ["InvoiceSource", "SyncClient"]


class InvoiceSource(Protocol):
    """The two operations a sync uses: the sync list and one sync-fetch request
    (`client.invoices`, in the forms the engine reads)."""

    async def sync_revisions(self) -> SyncRevisions:
        """Every invoice's id and revision (one request)."""
        ...

    async def fetch_batch(
        self, ids: builtins.list[int], *, keep_values: bool = False
    ) -> FetchedBatch:
        """Full invoices for at most 100 ids, as documents (keeping their checked values
        when asked), with the server's time and the members that could not be read (one
        request)."""
        ...


class SyncClient(Protocol):
    """A client as `SyncEngine` sees it: the two operations, the budget, the request count."""

    @property
    def invoices(self) -> InvoiceSource: ...

    @property
    def budget(self) -> RateBudget: ...

    @property
    def requests_sent(self) -> int: ...
