"""The hourly request budget of one account: full speed while there is budget, never over
the limit, optionally shared by every process and machine spending that account's hour.

The rule is the ledger's (`ledger.py`): `limit` units, each back one `period` after its
request's response. Where the ledger lives is a `BudgetStore`: this process, or a
SQLite file, PostgreSQL or Redis named by `shared=`. A store that cannot be reached
fails closed (`BudgetUnavailableError`): a request is never sent unchecked.

Why not a token bucket: a bucket that refills continuously lets `limit` go at once and
then refills while the hour is still running, so the server sees up to twice the limit
in one hour unless the burst is cut to a few requests. The ledger gives both the full
burst and the guarantee. aiolimiter still paces requests when `pace=` asks for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
from aiolimiter import AsyncLimiter

from invoicing_async._budget.ledger import Grant, LedgerView
from invoicing_async._budget.stores import (
    BudgetStore,
    MemoryBudgetStore,
    open_budget_store,
)
from invoicing_async.errors import (
    BudgetUnavailableError,
    ConfigurationError,
    InvoicingError,
    RateLimitExceeded,
)

T = TypeVar("T")

__all__ = ["BudgetHooks", "BudgetSnapshot", "RateBudget"]

logger = logging.getLogger("invoicing_async.budget")

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

    `remaining`: requests that may go out now. `used_in_period`: units out for requests
    sent through this budget in the last period (by any process sharing it);
    `held_for_others`: units held back because the server said someone else spent them.
    `refill_in`: seconds until the next unit comes back when none is free (else 0).
    """

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
        self._shared_url = shared
        # A store passed in is its owner's (one pool under many budgets): `close` leaves it.
        self._owns_store = store is None
        if store is None:
            store = (
                MemoryBudgetStore(clock)
                if shared is None
                else open_budget_store(shared, timeout=store_timeout)
            )
        self._store = store
        # In this process: taken and settled without awaiting, and read without a view.
        self._local = store if isinstance(store, MemoryBudgetStore) else None
        self._store_timeout = store_timeout
        self._bound_host: str | None = None
        self._pacer = None if pace is None else AsyncLimiter(1, 1.0 / pace)
        self._view: LedgerView | None = None
        self._view_at = 0.0
        self._server_limit: int | None = None
        self._server_remaining: int | None = None
        self._lines: dict[int, asyncio.Lock] = {}  # callers waiting, by reserve kept
        # Store calls given up on, still cancelling: kept referenced until they end.
        self._abandoned: set[asyncio.Future[Any]] = set()

    def __repr__(self) -> str:
        s = self.snapshot()
        where = f", shared={_redact(self._shared_url)!r}" if self._shared_url else ""
        return (
            f"RateBudget(limit={self.limit}, period={self.period}{where}, "
            f"remaining={s.remaining}, server_remaining={s.server_remaining})"
        )

    @property
    def shared(self) -> bool:
        return self._store.shared

    def _bind(self, host: str) -> None:
        """Name the budget after the client's host unless `key` was given.

        A shared budget without a key serves one host: a second host would spend the
        first account's hour, so it is refused.
        """
        if self.key is None:
            self.key = host
            self._bound_host = host
        elif self.shared and self._bound_host is not None and self._bound_host != host:
            raise ConfigurationError(
                f"this shared budget counts requests to {self._bound_host}; give the client "
                f"for {host} its own RateBudget (or name the account with key=)"
            )

    def _key(self) -> str:
        return self.key if self.key is not None else "default"

    # -- taking and settling -----------------------------------------------------------

    async def _acquire(
        self, *, max_wait: float | None = None, background: bool = False, hold: float | None = None
    ) -> Grant:
        """Wait for a unit and take it.

        Raises `RateLimitExceeded` at once (without sleeping) when the wait would be
        longer than `max_wait` seconds (`None` waits as long as it takes). `background`
        work leaves the `reserve` alone. `hold` bounds the request's time in flight.
        """
        loop = asyncio.get_running_loop()
        deadline = None if max_wait is None else loop.time() + max_wait
        keep = self.reserve if background else 0
        hold = DEFAULT_HOLD if hold is None else hold
        if self._pacer is not None:
            await self._pacer.acquire()
        taken = await self._take(hold, keep, deadline, max_wait)
        if isinstance(taken, Grant):
            return taken
        # Wait in line: one caller of this process asks the store at a time, so a crowd
        # of callers does not wake at once and stampede a shared store.
        line = self._lines.setdefault(keep, asyncio.Lock())
        try:
            await asyncio.wait_for(line.acquire(), _left(deadline))
        except asyncio.TimeoutError:
            raise self._spent(keep, self.time_for(1, background=bool(keep)), max_wait) from None
        try:
            while True:
                taken = await self._take(hold, keep, deadline, max_wait)
                if isinstance(taken, Grant):
                    return taken
                await asyncio.sleep(min(taken, _SHARED_POLL) if self.shared else taken)
        finally:
            line.release()

    async def _take(
        self, hold: float, keep: int, deadline: float | None, max_wait: float | None
    ) -> Grant | float:
        """One try: the permit, or the seconds to sleep before the next try."""
        if self._local is not None:
            result = self._local.take_now(self._key(), self, hold=hold, keep=keep)
        else:
            try:
                result, view = await self._call(
                    self._store.take(self._key(), self, hold=hold, keep=keep)
                )
            except BudgetUnavailableError as exc:
                # Fail closed: a request whose unit cannot be taken does not go out.
                raise BudgetUnavailableError(f"{exc}; the request was not sent") from exc
            self._remember(view)
        if isinstance(result, Grant):
            return result
        wait = result.wait + _WAKE_MARGIN
        left = _left(deadline)
        if left is not None and wait > left + 1e-9:
            raise self._spent(keep, wait, max_wait)
        return wait

    @staticmethod
    def _spent(keep: int, wait: float, max_wait: float | None) -> RateLimitExceeded:
        what = "background budget (reserve kept)" if keep else "request budget"
        return RateLimitExceeded(
            f"{what} spent: next request possible in ~{wait:.0f}s, "
            f"more than max_wait={max_wait:g}s",
            retry_after=wait,
        )

    async def _settle(self, permit: Grant, *, sent: bool = True) -> None:
        """The request got no response. `sent=False`: it never left, the unit comes back."""
        await self._update(permit, sent=sent, remaining=None)

    async def _observe(self, permit: Grant, *, limit: int | None, remaining: int | None) -> None:
        """The response to `permit`'s request arrived with these rate headers."""
        self._note_server(limit, remaining)
        await self._update(permit, sent=True, remaining=remaining)

    def _note_server(self, limit: int | None, remaining: int | None) -> None:
        if limit is not None:
            self._server_limit = limit
        if remaining is not None:
            self._server_remaining = remaining if remaining > 0 else 0

    async def _exhausted(self, permit: Grant) -> float:
        """The server refused `permit`'s request for the budget; returns the estimated wait.

        Every user of this budget (every process, when shared) stops until then.
        """
        self._server_remaining = 0
        await self._update(permit, sent=True, remaining=0)
        return self.time_for(1)

    async def _update(self, permit: Grant, *, sent: bool, remaining: int | None) -> None:
        if self._local is not None:
            self._local.settle_now(
                self._key(), self, permit.unit, permit.taken_at, sent=sent, remaining=remaining
            )
            return
        # The request is over: a store that fails now must not lose its response. The
        # unit then comes back `period + hold` after it was taken, which is still safe.
        try:
            view = await self._call(
                self._store.settle(
                    self._key(), self, permit.unit, permit.taken_at, sent=sent, remaining=remaining
                )
            )
        except BudgetUnavailableError as exc:
            logger.warning("budget not updated after a request: %s", exc)
            return
        self._remember(view)

    async def refresh(self) -> BudgetSnapshot:
        """Read the ledger now (a shared store's state changes with other processes)."""
        self._remember(await self._call(self._store.view(self._key(), self)))
        return self.snapshot()

    async def _call(self, operation: Awaitable[T]) -> T:
        """Run a store operation; a shared store that fails or stalls fails closed."""
        if not self.shared:
            return await operation
        where = _redact(self._shared_url)
        task = asyncio.ensure_future(operation)
        try:
            done, _ = await asyncio.wait({task}, timeout=self._store_timeout)
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
                f"shared budget {where} did not answer within {self._store_timeout:g}s "
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
        self._view_at = self._local_now()

    def _local_now(self) -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    # -- estimates (no I/O: from the last view of a shared store) ----------------------

    def _current(self) -> LedgerView:
        if self._local is not None:
            return self._local.view_now(self._key(), self)
        if self._view is None:
            return LedgerView(self.limit, 0, 0, ())
        elapsed = self._local_now() - self._view_at
        returns = tuple(r - elapsed for r in self._view.returns_in if r > elapsed)
        return LedgerView(self.limit, len(returns), self._view.phantoms, returns)

    def available_now(self, *, background: bool = False) -> int:
        """How many requests could go out now without waiting."""
        free = self._current().free - (self.reserve if background else 0)
        return max(0, free)

    def time_for(self, requests: int, *, background: bool = False) -> float:
        """Estimated seconds until `requests` more requests have gone out at full speed."""
        view = self._current()
        extra = requests - (view.free - (self.reserve if background else 0))
        if extra <= 0:
            return 0.0
        returns = view.returns_in
        if not returns:
            return self.period * ((extra - 1) // self.limit + 1)
        k = extra - 1
        cycles, index = divmod(k, len(returns))
        return max(0.0, returns[index]) + cycles * self.period

    def snapshot(self) -> BudgetSnapshot:
        view = self._current()
        return BudgetSnapshot(
            limit=self.limit,
            period=self.period,
            remaining=view.free,
            used_in_period=view.in_use - view.phantoms,
            held_for_others=view.phantoms,
            reserve=self.reserve,
            server_limit=self._server_limit,
            server_remaining=self._server_remaining,
            refill_in=0.0 if view.free else max(0.0, view.returns_in[0] if view.returns_in else 0),
            shared=self.shared,
        )

    async def close(self) -> None:
        """Close a shared store's connections (not those of a `store` passed in)."""
        if self._owns_store:
            await self._store.close()


class BudgetHooks:
    """The transport's side of a budget: a unit taken before each request, settled after.

    Not part of `RateBudget`'s public surface: users read a budget, the transport spends it.
    """

    __slots__ = ("budget",)

    def __init__(self, budget: RateBudget) -> None:
        self.budget = budget

    def bind(self, host: str) -> None:
        """Name the budget after the client's host unless it has a `key`."""
        self.budget._bind(host)  # noqa: SLF001 - the budget's transport side

    async def acquire(
        self, *, max_wait: float | None = None, background: bool = False, hold: float | None = None
    ) -> Grant:
        """Wait for a unit and take it (`RateLimitExceeded` past `max_wait`)."""
        return await self.budget._acquire(  # noqa: SLF001
            max_wait=max_wait, background=background, hold=hold
        )

    def take_at_once(self, *, background: bool = False, hold: float | None = None) -> Grant | None:
        """A unit now, without awaiting, when that needs no I/O and no wait (the budget
        is in this process and unpaced, and a unit is free); None: `acquire` instead."""
        budget = self.budget
        local = budget._local  # noqa: SLF001 - the transport's side of the budget
        if local is None or budget._pacer is not None:  # noqa: SLF001
            return None
        result = local.take_now(
            budget._key(),  # noqa: SLF001
            budget,
            hold=DEFAULT_HOLD if hold is None else hold,
            keep=budget.reserve if background else 0,
        )
        return result if result.__class__ is Grant else None

    def observe_at_once(self, permit: Grant, *, limit: int | None, remaining: int | None) -> bool:
        """`observe` without awaiting when that needs no I/O; False: await `observe`."""
        budget = self.budget
        local = budget._local  # noqa: SLF001
        if local is None:
            return False
        budget._note_server(limit, remaining)  # noqa: SLF001
        local.settle_now(
            budget._key(),  # noqa: SLF001
            budget,
            permit.unit,
            permit.taken_at,
            sent=True,
            remaining=remaining,
        )
        return True

    async def settle(self, permit: Grant, *, sent: bool = True) -> None:
        """The request got no response; `sent=False`: it never left."""
        await self.budget._settle(permit, sent=sent)  # noqa: SLF001

    async def observe(self, permit: Grant, *, limit: int | None, remaining: int | None) -> None:
        """The response arrived with these rate headers."""
        await self.budget._observe(permit, limit=limit, remaining=remaining)  # noqa: SLF001

    async def exhausted(self, permit: Grant) -> float:
        """The server refused the request for the budget; returns the estimated wait."""
        return await self.budget._exhausted(permit)  # noqa: SLF001


def _forget_abandoned(
    abandoned: set[asyncio.Future[Any]],
) -> Callable[[asyncio.Future[Any]], None]:
    def forget(task: asyncio.Future[Any]) -> None:
        abandoned.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: its failure was reported when it was abandoned

    return forget


def _left(deadline: float | None) -> float | None:
    """Seconds to a loop-time deadline (None: no deadline)."""
    if deadline is None:
        return None
    return max(0.0, deadline - asyncio.get_running_loop().time())


def _redact(url: str | None) -> str:
    """A URL without its password, for reprs and messages."""
    if url is None or "@" not in url:
        return url or ""
    scheme, _, rest = url.partition("://")
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://{user}@{host}"
