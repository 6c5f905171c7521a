"""An account in memory that satisfies the engine's `SyncClient` protocol: no HTTP.

Each call counts as one request; faults are scripted per call.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._models.documents import MemberError
from invoicing_async._resources.invoices import FetchedBatch


class MemoryInvoices:
    """The two operations of a sync, served from the account's dict."""

    def __init__(self, account: MemoryAccount) -> None:
        self.account = account

    async def sync_revisions(self) -> m.SyncRevisions:
        self.account.spend()
        return m.SyncRevisions((i, inv.revision or 0) for i, inv in self.account.data.items())

    async def fetch_batch(self, ids: builtins.list[int]) -> FetchedBatch:
        account = self.account
        account.spend()
        assert len(ids) <= 100
        account.fetch_sizes.append(len(ids))
        if account.fail_fetches:
            raise account.fail_fetches.pop(0)
        invoices = [
            account.data[i]
            for i in ids
            if i in account.data and i not in account.missing and i not in account.unreadable
        ]
        if account.reply is not None:
            invoices = account.reply(ids, invoices)
        unreadable = [MemberError(i, account.unreadable[i]) for i in ids if i in account.unreadable]
        return FetchedBatch.of_invoices(invoices, account.now, unreadable)


class MemoryAccount:
    """Invoices by id, a clock, a request counter and scripted faults."""

    def __init__(self, invoices: int = 0, *, now: float = 1_400_000_000.0) -> None:
        self.now = now
        self.data: dict[int, m.Invoice] = {}
        self.budget = ia.RateBudget(limit=100_000)
        self.requests_sent = 0
        self.allowance: int | None = None  # requests left before RateLimitExceeded
        self.fetch_sizes: list[int] = []
        self.missing: set[int] = set()
        self.unreadable: dict[int, str] = {}  # id -> the decoding error the reply causes
        self.fail_fetches: list[Exception] = []
        self.reply: Callable[[list[int], list[m.Invoice]], list[m.Invoice]] | None = None
        self.invoices = MemoryInvoices(self)
        for ident in range(1, invoices + 1):
            self.change(ident)

    def spend(self) -> None:
        if self.allowance is not None:
            if self.allowance <= 0:
                raise ia.RateLimitExceeded("budget spent (scripted)", retry_after=0.01)
            self.allowance -= 1
        self.requests_sent += 1

    def change(self, ident: int, *, po: str | None = None) -> None:
        """Create or change an invoice now: its revision is the current second."""
        self.data[ident] = m.Invoice(
            id=ident, revision=int(self.now), po_number=po or f"{ident}@{self.now}", state="open"
        )

    def tick(self, seconds: float = 1.0) -> None:
        self.now += seconds
