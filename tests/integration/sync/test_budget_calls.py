"""Calls a run makes to a shared budget's store (issue #48): a run reads the budget's
view from the settle of its list request, not by a call more (a round trip to PostgreSQL
or Redis at every run of every account), and still asks the store when the plan sent
nothing."""

from __future__ import annotations

from collections import Counter
from typing import Any

import invoicing_async as ia
from invoicing_async._budget.ledger import Grant, LedgerParams, LedgerView, Refusal
from invoicing_async._budget.stores import MemoryBudgetStore, Turns
from invoicing_async.sync import MemoryStore, SyncEngine
from invoicing_async.testing import FakeInvoicingService, populate


class CountingStore(MemoryBudgetStore):
    """The in-process ledger as a shared store: each call counted, answering with the
    ledger's view as PostgreSQL and Redis do."""

    shared = True

    def __init__(self) -> None:
        super().__init__()
        self.turns = Turns(4, 5.0)
        self.calls: Counter[str] = Counter()

    async def take(  # type: ignore[override]
        self, key: str, params: LedgerParams, **options: Any
    ) -> tuple[Grant | Refusal, LedgerView]:
        self.calls["take"] += 1
        result, _ = await super().take(key, params, **options)
        return result, self.ledger(key, params).view(self.now())

    async def settle(  # type: ignore[override]
        self, key: str, params: LedgerParams, *args: Any, **options: Any
    ) -> LedgerView:
        self.calls["settle"] += 1
        await super().settle(key, params, *args, **options)
        return self.ledger(key, params).view(self.now())

    async def view(self, key: str, params: LedgerParams) -> LedgerView:
        self.calls["view"] += 1
        return self.ledger(key, params).view(self.now())


async def test_a_no_change_run_takes_and_settles_its_list_request_only() -> None:
    async with FakeInvoicingService(tls=False) as service:
        populate(service.account, 150, seed=2)
        budget_store = CountingStore()
        memory = MemoryStore()
        async with service.client(budget=ia.RateBudget(1000, store=budget_store)) as client:
            first = await SyncEngine(client, memory).run()
            assert first.created == 150
            assert budget_store.calls == {"take": 3, "settle": 3}  # the list, 2 fetches
            budget_store.calls.clear()
            again = await SyncEngine(client, memory).run()
            assert again.unchanged == 150
            assert budget_store.calls == {"take": 1, "settle": 1}
            await client.budget.refresh()  # what a view would have told the run
            assert again.budget_available == client.budget.available_now(background=True)
