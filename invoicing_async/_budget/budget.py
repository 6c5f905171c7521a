"""The hourly request budget of one account: full speed while there is budget, never over
the limit, optionally shared by every process spending that account's hour.

The rule is the ledger's (`ledger.py`): `limit` units, each back one `period` after its
request's response (a token bucket would let the server see up to twice the limit in one
hour). Where the ledger lives is a `BudgetStore`; one that cannot be reached fails closed
(`BudgetUnavailableError`): a request is never sent unchecked."""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
from aiolimiter import AsyncLimiter

from invoicing_async._budget.ledger import Grant, LedgerView
from invoicing_async._budget.stores import BudgetStore, MemoryBudgetStore, open_budget_store
from invoicing_async._text import package_logger
from invoicing_async.errors import (
    BudgetUnavailableError,
    ConfigurationError,
    InvoicingError,
    RateLimitExceeded,
)

T = TypeVar("T")

__all__ = ["BudgetSnapshot", "RateBudget", "Spender", "spender_of"]

logger = package_logger("invoicing_async.budget")

# Added to each computed wait, so a unit has surely come back on waking.
_WAKE_MARGIN = 0.001
# The longest a caller sleeps before asking a shared store again: other processes may
# hand units back (a probe's answer) before the estimate.
_SHARED_POLL = 5.0
#: Seconds a request may spend in flight when the caller does not say (its timeout).
DEFAULT_HOLD = 300.0


@attrs.frozen
class BudgetSnapshot:
    """What the budget looks like now, for progress displays and planning.

    `remaining`: requests that may go out now. `used_in_period`: units out for requests sent
    in the last period (by any process sharing it); `held_for_others`: units the server says
    someone else spent; `refill_in`: seconds until the next unit comes back when none is free."""

    limit: int
    period: float
    remaining: int
    used_in_period: int
    held_for_others: int
    reserve: int
    server_limit: int | None
    server_remaining: int | None
    refill_in: float
    shared: bool


class RateBudget:
    """The request budget of one account; share one instance between its clients.

    `limit` requests per `period` seconds (350 per hour by default). All may go at once;
    each comes back one period after its response. `shared` (``sqlite:///path``,
    ``postgresql://…``, ``redis://…``) shares the units with every process using the
    same URL and `key` (default: the client's host). `reserve` units are kept for
    interactive calls: background work (the sync engine) stops short of them. `pace`
    (requests per second) spaces requests out through aiolimiter.
    """

    def __init__(
        self,
        limit: int = 350,
        period: float = 3600.0,
        *,
        shared: str | None = None,
        key: str | None = None,
        reserve: int = 0,
        pace: float | None = None,
        store_timeout: float = 5.0,
        clock: Callable[[], float] | None = None,
        store: BudgetStore | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        if period <= 0:
            raise ValueError("period must be positive")
        if not 0 <= reserve < limit:
            raise ValueError("reserve must be at least 0 and less than limit")
        if pace is not None and pace <= 0:
            raise ValueError("pace must be positive (requests per second)")
        self.limit = limit
        self.period = period
        self.reserve = reserve
        self.key = key
        # A store passed in is its owner's (one pool under many budgets): `close` leaves it.
        self._owns_store = store is None
        if store is None:
            store = (
                MemoryBudgetStore(clock)
                if shared is None
                else open_budget_store(shared, timeout=store_timeout)
            )
        self._spender = Spender(self, store, shared_url=shared, pace=pace, timeout=store_timeout)

    def __repr__(self) -> str:
        s = self.snapshot()
        url = self._spender.shared_url
        where = f", shared={_redact(url)!r}" if url else ""
        return (
            f"RateBudget(limit={self.limit}, period={self.period}{where}, "
            f"remaining={s.remaining}, server_remaining={s.server_remaining})"
        )

    @property
    def shared(self) -> bool:
        return self._spender.store.shared

    async def refresh(self) -> BudgetSnapshot:
        """Read the ledger now and return its snapshot (a shared store's state changes
        with other processes; `snapshot()` alone is this process's last view)."""
        await self._spender.refresh()
        return self.snapshot()

    # -- estimates (no I/O: from the store's last answer) -------------------------------

    def available_now(self, *, background: bool = False) -> int:
        """How many requests could go out now without waiting."""
        free = self._spender.current().free - (self.reserve if background else 0)
        return max(0, free)

    def time_for(self, requests: int, *, background: bool = False) -> float:
        """Estimated seconds until `requests` more requests have gone out at full speed
        (units still out are taken to come back with the soonest of them)."""
        return self._spender.wait_for(requests, self.reserve if background else 0)

    def snapshot(self) -> BudgetSnapshot:
        """This process's last view of the budget, without I/O: a shared store's other
        users may have spent more since; `await refresh()` reads the store now."""
        spender = self._spender
        view = spender.current()
        return BudgetSnapshot(
            limit=self.limit,
            period=self.period,
            remaining=view.free,
            used_in_period=view.in_use - view.phantoms,
            held_for_others=view.phantoms,
            reserve=self.reserve,
            server_limit=spender.server_limit,
            server_remaining=spender.server_remaining,
            refill_in=0.0 if view.free else max(0.0, view.next_in or 0.0),
            shared=self.shared,
        )

    async def close(self) -> None:
        """Close a shared store's connections (not those of a `store` passed in)."""
        if self._owns_store:
            await self._spender.store.close()


def spender_of(budget: RateBudget) -> Spender:
    """The transport's side of `budget`: kept off `RateBudget`, whose users read it while
    the transport spends it."""
    return budget._spender  # noqa: SLF001 - the one way in, for the transport


class Spender:
    """What the transport does with a budget: `take` a unit before each request and `settle`
    it after; it keeps the store's last answer for the budget's estimates."""

    def __init__(
        self,
        budget: RateBudget,
        store: BudgetStore,
        *,
        shared_url: str | None,
        pace: float | None,
        timeout: float,
    ) -> None:
        self.budget = budget
        self.store = store
        self.shared_url = shared_url
        self.server_limit: int | None = None
        self.server_remaining: int | None = None
        self._shared = store.shared
        self._local = store if isinstance(store, MemoryBudgetStore) else None
        self._timeout = timeout
        self._pace = pace
        self._pacer = None if pace is None else AsyncLimiter(1, 1.0 / pace)
        self._bound_host: str | None = None
        self._view = LedgerView(budget.limit, 0, 0, None)
        self._view_at = 0.0
        self._lines: dict[int, asyncio.Lock] = {}  # callers waiting, by reserve kept
        # Store calls given up on, still cancelling: kept referenced until they end.
        self._abandoned: set[asyncio.Future[Any]] = set()
        _SPENDERS.add(self)

    def after_fork(self) -> None:
        """In a forked child: drop what belongs to the parent's event loops (the lines of
        waiting callers, the pacer), which the child's loop must not touch."""
        self._lines = {}
        self._abandoned = set()
        self._pacer = None if self._pace is None else AsyncLimiter(1, 1.0 / self._pace)

    def bind(self, host: str) -> None:
        """Name the budget after the client's host unless `key` was given (a shared budget
        without a key serves one host only)."""
        budget = self.budget
        if budget.key is None:
            budget.key = self._bound_host = host
        elif self._shared and self._bound_host is not None and self._bound_host != host:
            raise ConfigurationError(
                f"this shared budget counts requests to {self._bound_host}; give the client "
                f"for {host} its own RateBudget (or name the account with key=)"
            )

    async def take(
        self,
        *,
        max_wait: float | None = None,
        background: bool = False,
        hold: float | None = None,
        on_wait: Callable[[float], None] | None = None,
    ) -> Grant:
        """Wait for a unit and take it.

        Raises `RateLimitExceeded` at once when the wait would exceed `max_wait` seconds (`None`
        waits as long as it takes). `background` work leaves the `reserve` alone. `on_wait`
        hears the seconds waited when the first try was refused (for tracing)."""
        keep = self.budget.reserve if background else 0
        hold = DEFAULT_HOLD if hold is None else hold
        if self._pacer is not None:
            await self._pacer.acquire()
        deadline = None if max_wait is None else asyncio.get_running_loop().time() + max_wait
        key = self.budget.key or "default"
        line: asyncio.Lock | None = None  # held from the first try that found no unit
        refused_at: float | None = None
        try:
            while True:
                operation = self.store.take(key, self.budget, hold=hold, keep=keep)
                try:
                    result, view = await (self._call(operation) if self._shared else operation)
                except BudgetUnavailableError as exc:
                    # Fail closed: a request whose unit cannot be taken does not go out.
                    raise BudgetUnavailableError(f"{exc}; the request was not sent") from exc
                if view is not None:
                    self._remember(view)
                if result.__class__ is Grant:
                    if refused_at is not None and on_wait is not None:
                        on_wait(asyncio.get_running_loop().time() - refused_at)
                    return result
                now = asyncio.get_running_loop().time()
                if refused_at is None:
                    refused_at = now
                wait = result.wait + _WAKE_MARGIN  # type: ignore[union-attr]
                left = None if deadline is None else max(0.0, deadline - now)
                if left is not None and wait > left + 1e-9:
                    raise _spent(keep, wait, max_wait)
                if line is not None:
                    await asyncio.sleep(min(wait, _SHARED_POLL) if self._shared else wait)
                    continue
                # Wait in line: one caller of this process asks the store at a time, so a
                # crowd of callers does not wake at once and stampede a shared store.
                waiting = self._lines.setdefault(keep, asyncio.Lock())
                try:
                    await asyncio.wait_for(waiting.acquire(), left)
                except asyncio.TimeoutError:
                    raise _spent(keep, self.wait_for(1, keep), max_wait) from None
                line = waiting
        finally:
            if line is not None:
                line.release()

    async def settle(
        self,
        permit: Grant,
        *,
        sent: bool = True,
        limit: int | None = None,
        remaining: int | None = None,
        refused: bool = False,
    ) -> float | None:
        """The request of `permit` ended: `sent=False` if it surely never left, the server's rate
        headers if answered, `refused` if refused for the budget (returns the estimated wait)."""
        if refused:
            remaining = 0
        if limit is not None:
            self.server_limit = limit
        if remaining is not None:
            self.server_remaining = remaining if remaining > 0 else 0
        key = self.budget.key or "default"
        operation = self.store.settle(
            key, self.budget, permit.unit, permit.taken_at, sent=sent, remaining=remaining
        )
        # The request is over: a store that fails now must not lose its response. The
        # unit then comes back `period + hold` after it was taken, which is still safe.
        try:
            view = await (self._call(operation) if self._shared else operation)
        except BudgetUnavailableError as exc:
            logger.warning("budget not updated after a request: %s", exc)
        else:
            if view is not None:
                self._remember(view)
        return self.wait_for(1, 0) if refused else None

    async def refresh(self) -> None:
        """Ask a shared store for its view now (the in-process ledger is read as it is)."""
        if self._shared:
            self._remember(
                await self._call(self.store.view(self.budget.key or "default", self.budget))
            )

    async def _call(self, operation: Awaitable[T]) -> T:
        """Run a shared store's operation; one that fails or stalls fails closed."""
        where = _redact(self.shared_url)
        turns = self.store.turns
        if turns is not None:
            try:  # waiting in this process for a connection is untimed: not the store's fault
                await turns.wait()
            except BaseException as exc:
                if asyncio.iscoroutine(operation):
                    operation.close()
                if isinstance(exc, BudgetUnavailableError):
                    raise BudgetUnavailableError(f"shared budget {where} {exc}") from None
                raise
        task = asyncio.ensure_future(operation)
        if turns is not None:
            task.add_done_callback(turns.ended)
        try:
            done, _ = await asyncio.wait({task}, timeout=self._timeout)
        except BaseException:  # the caller was cancelled: so is the operation
            task.cancel()
            raise
        if not done:
            # Cancelled without waiting: a client library may await its server to cancel
            # the query (psycopg does), which a frozen server never answers.
            task.cancel()
            self._abandoned.add(task)
            task.add_done_callback(_forget_abandoned(self._abandoned))
            raise BudgetUnavailableError(
                f"shared budget {where} did not answer within {self._timeout:g}s "
                "(check that the server is up and reachable)"
            )
        try:
            return task.result()
        except BudgetUnavailableError as exc:
            raise BudgetUnavailableError(f"shared budget {where}: {exc}") from exc
        except InvoicingError:
            raise
        except Exception as exc:
            raise BudgetUnavailableError(
                f"shared budget {where} failed: {type(exc).__name__}: {exc}"
            ) from exc

    def _remember(self, view: LedgerView) -> None:
        self._view = view
        self._view_at = _local_now()

    def current(self) -> LedgerView:
        """The in-process ledger as it is, or a shared store's last answer aged by the
        time since (estimates do no I/O)."""
        if self._local is not None:
            return self._local.ledger(self.budget.key or "default", self.budget).view(
                self._local.now()
            )
        view = self._view
        if view.next_in is None:
            return view
        return view._replace(next_in=view.next_in - (_local_now() - self._view_at))

    def wait_for(self, requests: int, keep: int) -> float:
        """Estimated seconds until `requests` more requests have gone out at full speed."""
        view = self.current()
        extra = requests - (view.free - keep)
        if extra <= 0:
            return 0.0
        period = self.budget.period
        if view.next_in is None or not view.in_use:
            return period * ((extra - 1) // self.budget.limit + 1)
        return max(0.0, view.next_in) + (extra - 1) // view.in_use * period


_SPENDERS: weakref.WeakSet[Spender] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for spender in list(_SPENDERS):
        spender.after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _spent(keep: int, wait: float, max_wait: float | None) -> RateLimitExceeded:
    what = "background budget (reserve kept)" if keep else "request budget"
    return RateLimitExceeded(
        f"{what} spent: next request possible in ~{wait:.0f}s, more than max_wait={max_wait:g}s",
        retry_after=wait,
    )


def _local_now() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


def _forget_abandoned(abandoned: set[asyncio.Future[Any]]) -> Callable[[asyncio.Future[Any]], None]:
    def forget(task: asyncio.Future[Any]) -> None:
        abandoned.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: its failure was reported when it was abandoned

    return forget


def _redact(url: str | None) -> str:
    """A URL without its password, for reprs and messages."""
    if url is None or "@" not in url:
        return url or ""
    scheme, _, rest = url.partition("://")
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://{user}@{host}"
