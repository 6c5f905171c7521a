"""Where a budget's ledger lives: in this process, or shared through SQLite, PostgreSQL or
Redis. Every operation is one atomic step timed by the store's own clock; a shared store
answers with the ledger's view (counts, never every unit), the in-process one with None."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import Callable
from typing import Any, Protocol
from weakref import WeakSet

from invoicing_async._budget.ledger import Grant, LedgerParams, LedgerView, MemoryLedger, Refusal
from invoicing_async.errors import BudgetUnavailableError, ConfigurationError

__all__ = [
    "BudgetStore",
    "ForkAware",
    "MemoryBudgetStore",
    "Turns",
    "keep_inherited",
    "open_budget_store",
    "renew_after_fork",
]


class ForkAware(Protocol):
    """A shared store that a forked child must not use as inherited (its connections
    and threads are the parent's): `_after_fork` makes it open its own on first use."""

    def _after_fork(self) -> None: ...


_FORK_AWARE: WeakSet[Any] = WeakSet()
#: What forked children inherited (connections, pools): kept referenced and never used or
#: closed here, since closing may talk on a connection the parent still uses.
_INHERITED: list[Any] = []


def renew_after_fork(store: ForkAware) -> None:
    """Have `store._after_fork()` called in every forked child (Celery's prefork pool,
    gunicorn `--preload`) while `store` lives."""
    _FORK_AWARE.add(store)


def keep_inherited(thing: Any) -> None:
    """Keep `thing` (a connection or pool of the parent) referenced in the child, unused."""
    _INHERITED.append(thing)


def _after_fork_in_child() -> None:
    for store in list(_FORK_AWARE):
        store._after_fork()  # noqa: SLF001 - the store's own reset


os.register_at_fork(after_in_child=_after_fork_in_child)


class Turns:
    """This process's callers waiting for one of a shared store's `size` connections: the
    wait is not the store's failure to answer, so the budget's `store_timeout` times a call
    only once it holds a turn. A wait fails only when no call has ended for `timeout` s
    (the store stopped answering). A turn is held until its call ends, even one given up on
    (it still holds its connection)."""

    def __init__(self, size: int, timeout: float) -> None:
        self.size = size
        self._free = asyncio.Semaphore(size)
        self._timeout = timeout
        self._ended_at = -math.inf  # loop time a call last ended

    async def wait(self) -> None:
        """Take a turn; `BudgetUnavailableError` when none came free and no call ended
        for `timeout` seconds."""
        loop = asyncio.get_running_loop()
        since = loop.time()
        while True:
            acquiring = asyncio.ensure_future(self._free.acquire())
            try:
                done, _ = await asyncio.wait({acquiring}, timeout=self._timeout)
            except BaseException:  # the caller was cancelled: no turn kept
                acquiring.cancel()
                acquiring.add_done_callback(self._give_back)
                raise
            if done:
                return
            acquiring.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await acquiring
            if not acquiring.cancelled():  # a turn came free as it was cancelled
                return
            if loop.time() - max(since, self._ended_at) >= self._timeout:
                raise BudgetUnavailableError(
                    f"did not answer within {self._timeout:g}s: no call of this process "
                    "ended meanwhile"
                )

    def _give_back(self, acquiring: asyncio.Future[Any]) -> None:
        if not acquiring.cancelled():
            self._free.release()

    def ended(self, call: asyncio.Future[Any]) -> None:
        """`call` (its turn's) is over: the turn is free; the store answered unless it
        was cancelled."""
        if not call.cancelled():
            self._ended_at = asyncio.get_running_loop().time()
        self._free.release()


class BudgetStore(Protocol):
    """One ledger per key; see `ledger.MemoryLedger` for the rule every store follows."""

    #: True when other processes may spend from the same ledger.
    shared: bool

    @property
    def turns(self) -> Turns | None:
        """A shared store's connections, waited for untimed; None in this process."""

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
    turns: Turns | None = None

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
