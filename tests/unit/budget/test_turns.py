"""A burst through a shared budget (hardening round 5, point 10), under virtual time: the
wait in this process for one of a store's few connections is not the store's failure to
answer, so 1,000 concurrent calls succeed with the default `store_timeout`; a store that
stops answering still fails every call closed, within the timeout."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import invoicing_async as ia
from invoicing_async._budget.budget import spender_of
from invoicing_async._budget.ledger import Grant, LedgerParams, LedgerView, Refusal
from invoicing_async._budget.stores import MemoryBudgetStore, Turns
from tests.virtual_time import virtual_time

HOUR = 3600.0
DEFAULT_STORE_TIMEOUT = 5.0  # RateBudget's default, the one the burst must succeed with


class PooledStore(MemoryBudgetStore):
    """The in-process ledger behind a shared store's constraints: `connections` calls at a
    time, each `latency` seconds on its connection (a round trip to Redis or PostgreSQL on a
    busy machine), answering with the ledger's view as the shared stores do."""

    shared = True

    def __init__(self, *, connections: int = 8, latency: float = 0.05) -> None:
        super().__init__()
        self.turns = Turns(connections, DEFAULT_STORE_TIMEOUT)
        self._pool = asyncio.Semaphore(connections)
        self.latency = latency
        self.calls = 0
        self.answering = asyncio.Event()
        self.answering.set()

    async def _on_a_connection(self) -> None:
        async with self._pool:
            self.calls += 1
            await asyncio.sleep(self.latency)
            await self.answering.wait()

    async def take(  # type: ignore[override]
        self, key: str, params: LedgerParams, **options: Any
    ) -> tuple[Grant | Refusal, LedgerView]:
        await self._on_a_connection()
        result, _ = await super().take(key, params, **options)
        return result, self.ledger(key, params).view(self.now())

    async def settle(  # type: ignore[override]
        self, key: str, params: LedgerParams, *args: Any, **options: Any
    ) -> LedgerView:
        await self._on_a_connection()
        await super().settle(key, params, *args, **options)
        return self.ledger(key, params).view(self.now())


async def burst(budget: ia.RateBudget, calls: int) -> list[BaseException]:
    spender = spender_of(budget)

    async def call() -> None:
        permit = await spender.take(max_wait=0)
        await spender.settle(permit, limit=None, remaining=None)

    results: list[Any] = await asyncio.gather(
        *(call() for _ in range(calls)), return_exceptions=True
    )
    return [r for r in results if isinstance(r, BaseException)]


@virtual_time
async def test_1000_concurrent_calls_queue_for_8_connections_and_none_fails() -> None:
    """2,000 store calls of 50 ms through 8 connections take 12.5 s, well past the 5 s
    timeout for the last in the queue: none fails, as each call's own time is 50 ms."""
    store = PooledStore()
    budget = ia.RateBudget(2000, HOUR, shared="redis://pooled", key="acme", store=store)
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await burst(budget, 1000) == []
    assert loop.time() - start >= 2000 * store.latency / 8 > DEFAULT_STORE_TIMEOUT
    assert store.ledger("acme", budget).view(loop.time()).in_use == 1000
    assert store.calls == 2000


@virtual_time
async def test_a_store_that_stops_answering_fails_every_waiting_call_closed() -> None:
    """Frozen with 1,000 callers queued: each fails with `BudgetUnavailableError` (never
    sent), and no later than a store timeout after the last call ended, plus one."""
    store = PooledStore()
    store.answering.clear()
    budget = ia.RateBudget(2000, HOUR, shared="redis://pooled", key="acme", store=store)
    loop = asyncio.get_running_loop()
    start = loop.time()
    failures = await burst(budget, 1000)
    assert len(failures) == 1000
    assert all(isinstance(f, ia.BudgetUnavailableError) for f in failures)
    assert all("the request was not sent" in str(f) for f in failures)
    assert loop.time() - start <= 2 * DEFAULT_STORE_TIMEOUT + 1


@virtual_time
async def test_callers_cancelled_while_waiting_give_their_turns_back() -> None:
    """A web request cancelled while it waited for a turn takes none with it: the next
    burst still has all 8 connections."""
    store = PooledStore(latency=1.0)
    budget = ia.RateBudget(2000, HOUR, shared="redis://pooled", key="acme", store=store)
    spender = spender_of(budget)
    waiting = [asyncio.ensure_future(spender.take(max_wait=0)) for _ in range(100)]
    await asyncio.sleep(0.5)  # 8 hold a connection, 92 wait for a turn
    for task in waiting:
        task.cancel()
    await asyncio.gather(*waiting, return_exceptions=True)
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await burst(budget, 16) == []
    # 32 store calls of 1 s: 4 s through 8 connections (5 s if a turn had been lost).
    assert loop.time() - start == pytest.approx(4.0, abs=0.1)
