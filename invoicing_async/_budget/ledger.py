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
A request in flight is kept out of the sorted index until its return time is known, so
the common call (take, then settle with a reassuring server) costs one sorted insertion
for each of the two indexes and nothing proportional to the units held.

`MemoryLedger` holds this state in a process; the SQLite store loads it into one and
writes it back in a transaction; PostgreSQL and Redis run the same rule server-side
(`budget_postgres`, `budget_redis`), tested against this one.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator, Sequence
from random import getrandbits
from typing import Any, NamedTuple, TypeVar, overload

import attrs
from sortedcontainers import SortedList

T = TypeVar("T")

#: Builds a named tuple from its values in one C call (the class's own `__new__` is
#: Python): for the units and grants made on every request.
_tuple: Callable[[type[T], tuple[Any, ...]], T] = tuple.__new__  # type: ignore[assignment]

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
    """A unit's id; phantom ids start with "p" (the native backends rely on this).

    64 random bits, unique among the units of a shared ledger; `random` is reseeded in a
    forked child, so a fork does not repeat its parent's ids.
    """
    return f"{'p' if phantom else 'r'}{getrandbits(64):016x}"


class Unit(NamedTuple):
    """One unit out: taken at `taken_at`, free again at `returns_at` (the ledger's clock).

    A tuple of atomic values, so the garbage collector stops tracking it: a ledger
    holding 30,000 units adds nothing to the collector's full passes.
    """

    id: str
    taken_at: float
    returns_at: float

    @property
    def phantom(self) -> bool:
        return self.id[0] == "p"


class Grant(NamedTuple):
    """A unit was taken: the request may go out (and settles the unit after)."""

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


def nth_return(placed: SortedList[tuple[float, str]], flying: Sequence[float], n: int) -> float:
    """The `n`-th soonest return (1-based) of two sorted sets of units, in
    O(log k · log n) (k: units in flight), without merging them."""
    # i units from `flying`, n - i from `placed`: the least i whose next flying unit
    # does not come back before the last placed unit chosen.
    lo, hi = max(0, n - len(placed)), min(n, len(flying))
    while lo < hi:
        i = (lo + hi) // 2
        if flying[i] < placed[n - i - 1][0]:
            lo = i + 1
        else:
            hi = i
    last_flying = flying[lo - 1] if lo > 0 else -math.inf
    last_placed = placed[n - lo - 1][0] if n - lo > 0 else -math.inf
    return max(last_flying, last_placed)


class ReturnsIn(Sequence[float]):
    """Seconds until each unit comes back, soonest first, read from the ledger's indexes
    without copying them; valid until the ledger changes (a view is read at once)."""

    __slots__ = ("_flying", "_ledger", "_now", "_placed")

    def __init__(self, ledger: MemoryLedger, now: float) -> None:
        self._ledger = ledger
        self._placed = ledger._placed  # noqa: SLF001 - the ledger's own view
        self._flying: list[float] | None = None
        self._now = now

    def _flying_returns(self) -> list[float]:
        if self._flying is None:
            self._flying = self._ledger._flying_returns_sorted()  # noqa: SLF001
        return self._flying

    def __len__(self) -> int:
        return len(self._placed) + len(self._ledger._flying)  # noqa: SLF001

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[float]: ...

    def __getitem__(self, index: int | slice) -> float | Sequence[float]:
        if isinstance(index, slice):
            return tuple(self)[index]
        size = len(self)
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            raise IndexError("returns_in index out of range")
        flying = self._flying_returns()
        if not flying:
            return self._placed[position][0] - self._now
        return nth_return(self._placed, flying, position + 1) - self._now

    def __iter__(self) -> Iterator[float]:
        now = self._now
        placed = (at for at, _ in self._placed)
        return (at - now for at in heapq.merge(placed, self._flying_returns()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


class MemoryLedger:
    """The ledger's state for one budget key, with the rule applied in Python.

    `units` is read-only outside: every change goes through the indexes below. A
    request's unit is *flying* from its take to its settle (its return time is not
    final yet) and *placed* after, as is every phantom and every unit loaded from a
    store: only placed units are kept sorted, so a call costs one sorted insertion.
    """

    def __init__(self, limit: int, period: float, units: dict[str, Unit] | None = None) -> None:
        self.limit = limit
        self.period = period
        self.units: dict[str, Unit] = units if units is not None else {}
        # Placed units by return time: expiry, the n-th return, the view.
        self._placed: SortedList[tuple[float, str]] = SortedList(
            (u.returns_at, u.id) for u in self.units.values()
        )
        # Flying units, and a heap of their return times (an entry is live while its
        # unit flies: a flying unit's return time never changes).
        self._flying: set[str] = set()
        self._flying_heap: list[tuple[float, str]] = []
        # Take times of our own requests: how many were taken after a given one.
        self._real_taken: SortedList[float] = SortedList(
            u.taken_at for u in self.units.values() if not u.phantom
        )
        # Heaps with stale entries skipped on the way out (an entry is live while its
        # unit is held with that return time): the soonest of ours, the latest phantom.
        self._real_returns = [(u.returns_at, u.id) for u in self.units.values() if not u.phantom]
        heapq.heapify(self._real_returns)
        self._phantom_returns = [(-u.returns_at, u.id) for u in self.units.values() if u.phantom]
        heapq.heapify(self._phantom_returns)
        self.phantoms = len(self._phantom_returns)
        # No unit comes back before this (it may be earlier than the truth, never later):
        # until then, expiry has nothing to do.
        self._next_due = self._placed[0][0] if self._placed else math.inf

    # -- the indexes ----------------------------------------------------------------------

    def _place(self, unit: Unit) -> None:
        self._placed.add((unit.returns_at, unit.id))
        if unit.returns_at < self._next_due:
            self._next_due = unit.returns_at

    def _add_phantom(self, unit: Unit) -> None:
        self.units[unit.id] = unit
        self._place(unit)
        self.phantoms += 1
        heapq.heappush(self._phantom_returns, (-unit.returns_at, unit.id))

    def _remove(self, unit: Unit) -> None:
        del self.units[unit.id]
        if unit.id in self._flying:
            self._flying.discard(unit.id)  # its heap entry goes stale
        else:
            self._placed.remove((unit.returns_at, unit.id))
        self._forget(unit)

    def _forget(self, unit: Unit) -> None:
        """Drop `unit` from the take-time index and the counts (heaps skip it lazily)."""
        if unit.phantom:
            self.phantoms -= 1
        else:
            self._real_taken.remove(unit.taken_at)
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
        if len(self._flying_heap) > 2 * len(self._flying) + 64:
            units = self.units
            self._flying_heap = [(units[i].returns_at, i) for i in self._flying]
            heapq.heapify(self._flying_heap)

    def _live(self, returns_at: float, unit_id: str) -> bool:
        unit = self.units.get(unit_id)
        return unit is not None and unit.returns_at == returns_at

    def _soonest_real(self) -> float | None:
        heap = self._real_returns
        while heap and not self._live(*heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _reschedule(self, unit: Unit, returns_at: float) -> None:
        """Bring a placed unit back sooner."""
        self._placed.remove((unit.returns_at, unit.id))
        moved = self.units[unit.id] = Unit(unit.id, unit.taken_at, returns_at)
        self._place(moved)
        if unit.phantom:
            heapq.heappush(self._phantom_returns, (-returns_at, unit.id))
        else:
            heapq.heappush(self._real_returns, (returns_at, unit.id))

    def _flying_returns_sorted(self) -> list[float]:
        units = self.units
        return sorted(units[i].returns_at for i in self._flying)

    def _nth_return(self, n: int) -> float:
        flying = self._flying_returns_sorted()
        if not flying:
            return self._placed[n - 1][0]
        return nth_return(self._placed, flying, n)

    # -- the rule -------------------------------------------------------------------------

    def expire(self, now: float) -> None:
        """Forget units that have come back."""
        if now < self._next_due:
            return
        placed = self._placed
        while placed and placed[0][0] <= now:
            _, unit_id = placed.pop(0)
            self._forget(self.units.pop(unit_id))
        heap, flying = self._flying_heap, self._flying
        while heap and (heap[0][0] <= now or heap[0][1] not in flying):
            _, unit_id = heapq.heappop(heap)
            if unit_id in flying:
                flying.discard(unit_id)
                self._forget(self.units.pop(unit_id))
        self._next_due = min(placed[0][0] if placed else math.inf, heap[0][0] if heap else math.inf)

    def take(self, now: float, *, hold: float, keep: int = 0) -> Grant | Refusal:
        """Take a unit if more than `keep` are free; else say when one will be."""
        if now >= self._next_due:
            self.expire(now)
        in_use = len(self.units)
        if self.limit - in_use > keep:
            unit_id = new_unit_id()
            returns_at = now + self.period + hold
            self.units[unit_id] = _tuple(Unit, (unit_id, now, returns_at))
            self._flying.add(unit_id)
            heapq.heappush(self._flying_heap, (returns_at, unit_id))
            heapq.heappush(self._real_returns, (returns_at, unit_id))
            self._real_taken.add(now)
            if returns_at < self._next_due:
                self._next_due = returns_at
            return _tuple(Grant, (unit_id, now))
        # Units that must come back before more than `keep` are free.
        needed = in_use - (self.limit - keep - 1)
        at = self._nth_return(needed) if needed <= in_use else now + self.period
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
        if now >= self._next_due:
            self.expire(now)
        unit = self.units.get(unit_id)
        if not sent:
            if unit is not None:
                self._remove(unit)
            return
        if unit is not None:
            back = now + self.period
            if unit_id in self._flying:
                self._flying.discard(unit_id)  # its heap entry goes stale
                if unit.returns_at > back:
                    unit = self.units[unit_id] = _tuple(Unit, (unit_id, unit.taken_at, back))
                    heapq.heappush(self._real_returns, (back, unit_id))
                self._place(unit)
                if len(self._flying_heap) > 2 * len(self._flying) + 64:
                    self._compact()
            elif unit.returns_at > back:
                self._reschedule(unit, back)
        if remaining is not None:
            self.heed_server(now, unit_id, taken_at, remaining)

    def heed_server(self, now: float, unit_id: str, taken_at: float, remaining: int) -> None:
        """Fit the free units to the server's word on the request taken at `taken_at`."""
        held = len(self.units)
        free = self.limit - held
        if not self.phantoms and free <= remaining - (held - self.phantoms):
            # However many of ours went after that request, the server allows what is
            # free, and there are no phantoms to hand back: nothing changes.
            return
        # Requests taken after that one may not have been counted in `remaining` yet:
        # assume they were not. Those taken at the same instant count as before it: under a
        # coarse clock a burst shares one timestamp, and counting it as "after" would hold
        # back half the hour.
        taken = self._real_taken
        after = len(taken) - taken.bisect_right(taken_at)
        unit = self.units.get(unit_id)
        if unit is not None and not unit.phantom and unit.taken_at > taken_at:
            after -= 1
        allowed = remaining - after
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
            self._add_phantom(Unit(new_unit_id(phantom=True), now, first if i == 0 else rest))

    def view(self, now: float) -> LedgerView:
        self.expire(now)
        return LedgerView(self.limit, len(self.units), self.phantoms, ReturnsIn(self, now))
