"""Where a budget's ledger lives: in this process, or shared through SQLite, PostgreSQL or
Redis. Every operation is one atomic step timed by the store's own clock; a shared store
answers with the ledger's view (counts, never every unit), the in-process one with None."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from invoicing_async._budget.ledger import Grant, LedgerParams, LedgerView, MemoryLedger, Refusal
from invoicing_async.errors import ConfigurationError

__all__ = ["BudgetStore", "MemoryBudgetStore", "open_budget_store"]


class BudgetStore(Protocol):
    """One ledger per key; see `ledger.MemoryLedger` for the rule every store follows."""

    #: True when other processes may spend from the same ledger.
    shared: bool

    async def take(
        self, key: str, params: LedgerParams, *, hold: float, keep: int
    ) -> tuple[Grant | Refusal, LedgerView | None]: ...

    async def settle(
        self,
        key: str,
        params: LedgerParams,
        unit: str,
        taken_at: float,
        *,
        sent: bool,
        remaining: int | None,
    ) -> LedgerView | None: ...

    async def view(self, key: str, params: LedgerParams) -> LedgerView: ...

    async def close(self) -> None: ...


class MemoryBudgetStore:
    """The ledger in this process, timed by the event loop (virtual time in tests)."""

    shared = False

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self._clock = clock
        self._ledgers: dict[str, MemoryLedger] = {}

    def now(self) -> float:
        if self._clock is not None:
            return self._clock()
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:  # a repr or snapshot outside a loop
            return time.monotonic()

    def ledger(self, key: str, params: LedgerParams) -> MemoryLedger:
        ledger = self._ledgers.get(key)
        if ledger is None:
            ledger = self._ledgers[key] = MemoryLedger(params.limit, params.period)
        return ledger

    async def take(
        self, key: str, params: LedgerParams, *, hold: float, keep: int
    ) -> tuple[Grant | Refusal, None]:
        ledger = self._ledgers.get(key) or self.ledger(key, params)
        now = asyncio.get_running_loop().time() if self._clock is None else self._clock()
        return ledger.take(now, hold=hold, keep=keep), None

    async def settle(
        self,
        key: str,
        params: LedgerParams,
        unit: str,
        taken_at: float,
        *,
        sent: bool,
        remaining: int | None,
    ) -> None:
        ledger = self._ledgers.get(key) or self.ledger(key, params)
        now = asyncio.get_running_loop().time() if self._clock is None else self._clock()
        ledger.settle(now, unit, taken_at, sent=sent, remaining=remaining)

    async def view(self, key: str, params: LedgerParams) -> LedgerView:
        return self.ledger(key, params).view(self.now())

    async def close(self) -> None:
        return None


def open_budget_store(url: str, *, timeout: float) -> BudgetStore:
    """The store a `shared=` URL names: sqlite:///path, postgresql://…, redis://…."""
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        from invoicing_async._budget.sqlite import SQLiteBudgetStore

        return SQLiteBudgetStore(url, timeout=timeout)
    if scheme in ("postgresql", "postgres"):
        from invoicing_async._budget.postgres import PostgresBudgetStore

        return PostgresBudgetStore(url, timeout=timeout)
    if scheme in ("redis", "rediss", "unix"):
        from invoicing_async._budget.redis import RedisBudgetStore

        return RedisBudgetStore(url, timeout=timeout)
    raise ConfigurationError(
        f"shared budget URL {url.split('://', 1)[0]}://… not understood: use "
        "sqlite:///path, postgresql://… or redis://…"
    )
