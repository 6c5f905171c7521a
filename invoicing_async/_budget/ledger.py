"""The budget's rule, free of I/O: `limit` units, each back one `period` after its request.

A unit is taken before a request goes out and comes back `period` seconds after the
response arrived (or, if no response is ever reported, `period + hold` after it was
taken: `hold` bounds the time a request may spend in flight). The server counts a request
when it arrives, which is between those two moments, so no window of `period` seconds at
the server ever holds more than `limit` requests spent through one ledger, whatever the
network delay. A fresh ledger lends all `limit` units at once.

The server's `X-RateLimit-Remaining` is folded in as *phantom* units: requests someone
else spent. When the server says fewer are left than the ledger has free, phantoms take
up the difference; when it says more, phantoms are handed back. When nothing is left, one
phantom comes back first (a probe) so that one request goes out to learn what is left,
and the ledger can never wedge.

Every operation is O(log n) (amortised) in the units held: units are indexed by return
time and by take time (sorted lists and heaps), and counts are kept, never scanned for.

`MemoryLedger` holds this state in a process; the SQLite store loads it into one and
writes it back in a transaction; PostgreSQL and Redis run the same rule server-side
(`budget_postgres`, `budget_redis`), tested against this one.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Iterator, Sequence
from typing import overload

import attrs
from sortedcontainers import SortedList

__all__ = [
    "Grant",
    "LedgerView",
    "MemoryLedger",
    "Refusal",
    "ReturnsIn",
    "Unit",
    "new_unit_id",
]


def new_unit_id(phantom: bool = False) -> str:
    """A unit's id; phantom ids start with "p" (the native backends rely on this)."""
    return ("p" if phantom else "r") + os.urandom(8).hex()


@attrs.define
class Unit:
    """One unit out: taken at `taken_at`, free again at `returns_at` (the ledger's clock)."""

    id: str
    taken_at: float
    returns_at: float

    @property
    def phantom(self) -> bool:
        return self.id[0] == "p"


@attrs.frozen
class Grant:
    """A unit was taken: the request may go out."""

    unit: str
    taken_at: float


@attrs.frozen
class Refusal:
    """No unit is free (beyond the reserve): one is expected in `wait` seconds."""

    wait: float


@attrs.frozen
class LedgerView:
    """What the ledger looks like: counts and the seconds until each unit out comes back."""

    limit: int
    in_use: int
    phantoms: int
    returns_in: Sequence[float]  # sorted, relative to the ledger's now

    @property
    def free(self) -> int:
        return max(0, self.limit - self.in_use)


class ReturnsIn(Sequence[float]):
    """Seconds until each unit comes back, soonest first, read from the ledger's order
    without copying it; valid until the ledger changes (a view is read at once)."""

    __slots__ = ("_now", "_order")

    def __init__(self, order: SortedList[tuple[float, str]], now: float) -> None:
        self._order = order
        self._now = now

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[float]: ...

    def __getitem__(self, index: int | slice) -> float | Sequence[float]:
        if isinstance(index, slice):
            return tuple(at - self._now for at, _ in self._order[index])
        return self._order[index][0] - self._now

    def __iter__(self) -> Iterator[float]:
        now = self._now
        return (at - now for at, _ in self._order)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


class MemoryLedger:
    """The ledger's state for one budget key, with the rule applied in Python.

    `units` is read-only outside: every change goes through the indexes below.
    """

    def __init__(self, limit: int, period: float, units: dict[str, Unit] | None = None) -> None:
        self.limit = limit
        self.period = period
        self.units: dict[str, Unit] = units if units is not None else {}
        # Every unit by return time: expiry, the n-th return, the view.
        self._by_return: SortedList[tuple[float, str]] = SortedList(
            (u.returns_at, u.id) for u in self.units.values()
        )
        # Our own requests by take time: how many were taken after a given one.
        self._real_by_taken: SortedList[tuple[float, str]] = SortedList(
            (u.taken_at, u.id) for u in self.units.values() if not u.phantom
        )
        # Heaps with stale entries skipped on the way out (an entry is live while its
        # unit is held with that return time): the soonest of ours, the latest phantom.
        self._real_returns = [(u.returns_at, u.id) for u in self.units.values() if not u.phantom]
        heapq.heapify(self._real_returns)
        self._phantom_returns = [(-u.returns_at, u.id) for u in self.units.values() if u.phantom]
        heapq.heapify(self._phantom_returns)
        self.phantoms = len(self._phantom_returns)

    # -- the indexes ----------------------------------------------------------------------

    def _add(self, unit: Unit) -> None:
        self.units[unit.id] = unit
        self._by_return.add((unit.returns_at, unit.id))
        if unit.phantom:
            self.phantoms += 1
            heapq.heappush(self._phantom_returns, (-unit.returns_at, unit.id))
        else:
            self._real_by_taken.add((unit.taken_at, unit.id))
            heapq.heappush(self._real_returns, (unit.returns_at, unit.id))

    def _remove(self, unit: Unit) -> None:
        del self.units[unit.id]
        self._by_return.remove((unit.returns_at, unit.id))
        self._forget(unit)

    def _forget(self, unit: Unit) -> None:
        """Drop `unit` from the take-time index and the counts (heaps skip it lazily)."""
        if unit.phantom:
            self.phantoms -= 1
        else:
            self._real_by_taken.remove((unit.taken_at, unit.id))
        self._compact()

    def _compact(self) -> None:
        """Rebuild a heap once stale entries outnumber live ones (bounds its memory)."""
        real = len(self.units) - self.phantoms
        if len(self._real_returns) > 2 * real + 64:
            self._real_returns = [
                (u.returns_at, u.id) for u in self.units.values() if not u.phantom
            ]
            heapq.heapify(self._real_returns)
        if len(self._phantom_returns) > 2 * self.phantoms + 64:
            self._phantom_returns = [
                (-u.returns_at, u.id) for u in self.units.values() if u.phantom
            ]
            heapq.heapify(self._phantom_returns)

    def _live(self, returns_at: float, unit_id: str) -> bool:
        unit = self.units.get(unit_id)
        return unit is not None and unit.returns_at == returns_at

    def _soonest_real(self) -> float | None:
        heap = self._real_returns
        while heap and not self._live(*heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _reschedule(self, unit: Unit, returns_at: float) -> None:
        self._by_return.remove((unit.returns_at, unit.id))
        unit.returns_at = returns_at
        self._by_return.add((returns_at, unit.id))
        if unit.phantom:
            heapq.heappush(self._phantom_returns, (-returns_at, unit.id))
        else:
            heapq.heappush(self._real_returns, (returns_at, unit.id))

    # -- the rule -------------------------------------------------------------------------

    def expire(self, now: float) -> None:
        """Forget units that have come back."""
        order = self._by_return
        while order and order[0][0] <= now:
            _, unit_id = order.pop(0)
            self._forget(self.units.pop(unit_id))

    def take(self, now: float, *, hold: float, keep: int = 0) -> Grant | Refusal:
        """Take a unit if more than `keep` are free; else say when one will be."""
        self.expire(now)
        in_use = len(self.units)
        if self.limit - in_use > keep:
            unit = Unit(new_unit_id(), now, now + self.period + hold)
            self._add(unit)
            return Grant(unit.id, now)
        # Units that must come back before more than `keep` are free.
        needed = in_use - (self.limit - keep - 1)
        at = self._by_return[needed - 1][0] if needed <= in_use else now + self.period
        return Refusal(max(0.0, at - now))

    def settle(
        self,
        now: float,
        unit_id: str,
        taken_at: float,
        *,
        sent: bool = True,
        remaining: int | None = None,
    ) -> None:
        """The request of `unit_id` ended.

        `sent=False`: it surely never reached the server, so the unit comes back now.
        Otherwise it comes back `period` after now, and the server's `remaining` (0 for a
        refusal for the budget) corrects what is free.
        """
        self.expire(now)
        unit = self.units.get(unit_id)
        if not sent:
            if unit is not None:
                self._remove(unit)
            return
        if unit is not None and unit.returns_at > now + self.period:
            self._reschedule(unit, now + self.period)
        if remaining is not None:
            self.heed_server(now, unit_id, taken_at, remaining)

    def heed_server(self, now: float, unit_id: str, taken_at: float, remaining: int) -> None:
        """Fit the free units to the server's word on the request taken at `taken_at`."""
        # Requests taken after that one may not have been counted in `remaining` yet:
        # assume they were not. Those taken at the same instant count as before it: under a
        # coarse clock a burst shares one timestamp, and counting it as "after" would hold
        # back half the hour.
        taken = self._real_by_taken
        after = len(taken) - taken.bisect_left((math.nextafter(taken_at, math.inf), ""))
        unit = self.units.get(unit_id)
        if unit is not None and not unit.phantom and unit.taken_at > taken_at:
            after -= 1
        allowed = remaining - after
        free = self.limit - len(self.units)
        if free > allowed:
            self._burn(now, free - max(0, allowed), exhausted=allowed <= 0)
        elif free < allowed:
            self._hand_back(allowed - free)

    def _hand_back(self, count: int) -> None:
        """Forget up to `count` phantoms, those held longest first."""
        heap = self._phantom_returns
        while count > 0 and heap:
            negative_at, unit_id = heapq.heappop(heap)
            if self._live(-negative_at, unit_id):
                self._remove(self.units[unit_id])
                count -= 1

    def _burn(self, now: float, count: int, *, exhausted: bool) -> None:
        if count <= 0:
            return
        if not exhausted:
            # Spent by someone else within the server's window: gone for a period at most.
            first = rest = now + self.period
        else:
            soonest = self._soonest_real()
            if soonest is not None:
                # Our own oldest request leaving the window frees one: it is the probe.
                first = rest = soonest + self.period
            else:
                # All spent by others: one probe a period from now, the rest held until the
                # probe's answer hands them back.
                first, rest = now + self.period, now + 2 * self.period
        for i in range(count):
            self._add(Unit(new_unit_id(phantom=True), now, first if i == 0 else rest))

    def view(self, now: float) -> LedgerView:
        self.expire(now)
        return LedgerView(
            self.limit, len(self.units), self.phantoms, ReturnsIn(self._by_return, now)
        )
