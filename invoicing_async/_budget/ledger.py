"""The budget's rule, free of I/O: `limit` units, each back one `period` after its request.

A unit is taken before a request goes out and comes back `period` after the response (or
`period + hold` after it was taken if none is reported). The server counts the request in
between, so no window of `period` seconds there holds more than `limit` of ours.

The server's `X-RateLimit-Remaining` is folded in as *phantom* units (others' requests),
kept as counted blocks; when nothing is left one comes back first as a probe, so the ledger
never wedges. A take or a settle is O(log n) in the units out, and heeding an answer walks
the answered units taken during its request's flight. SQLite, PostgreSQL and Redis run the
same rule, tested against `MemoryLedger`."""

from __future__ import annotations

import math
from bisect import insort
from collections import deque
from collections.abc import Callable
from heapq import heappop, heappush, merge
from random import getrandbits
from typing import Any, NamedTuple, Protocol, TypeVar

import attrs
from sortedcontainers import SortedDict, SortedList

T = TypeVar("T")

#: Builds a named tuple from its values in one C call (the class's own `__new__` is
#: Python): for the units and grants made on every request.
_tuple: Callable[[type[T], tuple[Any, ...]], T] = tuple.__new__  # type: ignore[assignment]

__all__ = ["Grant", "LedgerParams", "LedgerView", "MemoryLedger", "Refusal", "Unit", "new_unit_id"]


class LedgerParams(Protocol):
    """What a store needs to know of the budget: its size and its period."""

    @property
    def limit(self) -> int: ...

    @property
    def period(self) -> float: ...


def new_unit_id() -> str:
    """A unit's id: 64 random bits, unique among the units of a shared ledger; `random` is
    reseeded in a forked child, so a fork does not repeat its parent's ids."""
    return f"r{getrandbits(64):016x}"


class Unit(NamedTuple):
    """One of our units out: taken at `taken_at`, free again at `returns_at` (a tuple of
    atomic values, so the garbage collector does not track it)."""

    id: str
    taken_at: float
    returns_at: float


class Grant(NamedTuple):
    """A unit was taken: the request may go out (and settles the unit after)."""

    unit: str
    taken_at: float


@attrs.frozen
class Refusal:
    """No unit is free (beyond the reserve): one is expected in `wait` seconds."""

    wait: float


class LedgerView(NamedTuple):
    """What a store answers: the units out, the phantoms among them, and the seconds
    until the soonest comes back (None: none is out)."""

    limit: int
    in_use: int
    phantoms: int
    next_in: float | None

    @property
    def free(self) -> int:
        return max(0, self.limit - self.in_use)


_GONE = Unit("", math.nan, math.nan)  # what an entry of a forgotten unit finds: never equal


class MemoryLedger:
    """The ledger's state for one budget key; `units` and `blocks` are read-only outside."""

    def __init__(self, limit: int, period: float) -> None:
        self.limit = limit
        self.period = period
        self.units: dict[str, Unit] = {}
        self.blocks: SortedDict[float, int] = SortedDict()
        self.phantoms = 0
        # Our units' return times, soonest first: those answered come back `period` after
        # their answer, so in the order answered (a queue); those in flight `period + hold`
        # after they were taken (a heap). An entry whose unit has moved on is skipped.
        self._answered: deque[tuple[float, str]] = deque()
        self._in_flight: list[tuple[float, str]] = []
        # Our units out by take time: those taken after one.
        self._taken: SortedList[tuple[float, str]] = SortedList()
        # The server's remaining in the answers to our units out, by id.
        self._heard: dict[str, int] = {}

    def _forget(self, unit: Unit) -> None:
        del self.units[unit.id]
        self._taken.remove((unit.taken_at, unit.id))
        self._heard.pop(unit.id, None)
        self._drop_moved_on()

    def _drop_moved_on(self) -> None:
        """Drop each queue's head while its unit has moved on: a head is always a unit out."""
        units, answered, in_flight = self.units, self._answered, self._in_flight
        while answered and units.get(answered[0][1], _GONE).returns_at != answered[0][0]:
            answered.popleft()
        while in_flight and units.get(in_flight[0][1], _GONE).returns_at != in_flight[0][0]:
            heappop(in_flight)

    def _soonest(self, *, ours_only: bool = False) -> float:
        answered, in_flight = self._answered, self._in_flight
        at = answered[0][0] if answered else math.inf
        if in_flight and in_flight[0][0] < at:
            at = in_flight[0][0]
        if self.blocks and not ours_only:
            at = min(at, self.blocks.peekitem(0)[0])
        return at

    def _nth_return(self, n: int) -> float:
        """The `n`-th soonest return (1-based) of every unit out, phantoms included."""
        units = self.units
        out = [(at, 1) for at, id in self._in_flight if units.get(id, _GONE).returns_at == at]
        out.sort()
        answered = ((at, 1) for at, id in self._answered if units.get(id, _GONE).returns_at == at)
        seen = 0
        for at, count in merge(out, answered, self.blocks.items()):
            seen += count
            if seen >= n:
                return at
        raise AssertionError(f"a refusal counted {n} units out, more than there are")

    def expire(self, now: float) -> None:
        """Forget units that have come back."""
        answered, in_flight, units = self._answered, self._in_flight, self.units
        while answered and answered[0][0] <= now:
            self._forget(units[answered.popleft()[1]])
        while in_flight and in_flight[0][0] <= now:
            self._forget(units[heappop(in_flight)[1]])
        blocks = self.blocks
        while blocks and blocks.peekitem(0)[0] <= now:
            self.phantoms -= blocks.popitem(0)[1]

    def take(self, now: float, *, hold: float, keep: int = 0) -> Grant | Refusal:
        """Take a unit if more than `keep` are free; else say when one will be."""
        self.expire(now)
        in_use = len(self.units) + self.phantoms
        if self.limit - in_use > keep:
            unit_id = new_unit_id()
            returns_at = now + self.period + hold
            self.units[unit_id] = _tuple(Unit, (unit_id, now, returns_at))
            heappush(self._in_flight, (returns_at, unit_id))
            self._taken.add((now, unit_id))
            return _tuple(Grant, (unit_id, now))
        # Units that must come back before more than `keep` are free.
        needed = in_use - (self.limit - keep - 1)
        return Refusal(max(0.0, self._nth_return(needed) - now))

    def settle(
        self,
        now: float,
        unit_id: str,
        taken_at: float,
        *,
        sent: bool = True,
        remaining: int | None = None,
    ) -> None:
        """The request of `unit_id` ended: with `sent=False` the unit comes back now, else
        `period` after now, and the server's `remaining` corrects what is free."""
        self.expire(now)
        unit = self.units.get(unit_id)
        back = now + self.period
        if unit is not None and not sent:
            self._forget(unit)
        elif unit is not None and unit.returns_at > back:
            self.units[unit_id] = _tuple(Unit, (unit_id, unit.taken_at, back))
            answered = self._answered
            if answered and answered[-1][0] > back:  # the clock went back
                insort(answered, (back, unit_id))
            else:
                answered.append((back, unit_id))
            self._drop_moved_on()
        if sent and remaining is not None:
            self.heed_server(now, unit_id, taken_at, remaining)

    def heed_server(self, now: float, unit_id: str, taken_at: float, remaining: int) -> None:
        """Fit the free units to the server's word on the request of `unit_id`, taken at
        `taken_at`."""
        if unit_id in self.units:
            self._heard[unit_id] = remaining
        ours = len(self.units)
        free = self.limit - ours - self.phantoms
        if not self.phantoms and free <= remaining - ours:
            # However many of ours went after that request, the server allows what is
            # free, and there are no phantoms to hand back: nothing changes.
            return
        # Requests taken after that one may not have been counted in `remaining` yet:
        # assume they were not, unless their own answer showed more remaining (the server
        # counted them first). Those taken at the same instant count as before it: under a
        # coarse clock a burst shares one timestamp, and counting it as "after" would hold
        # back half the hour.
        heard, taken = self._heard, self._taken
        first = taken.bisect_left((math.nextafter(taken_at, math.inf), ""))
        after = sum(heard.get(id, -1) <= remaining for _, id in taken.islice(first))
        allowed = remaining - after
        if free > allowed:
            self._burn(now, free - max(0, allowed), exhausted=allowed <= 0)
        elif free < allowed:
            self._hand_back(allowed - free)

    def _hand_back(self, count: int) -> None:
        """Forget up to `count` phantoms, those held longest first."""
        blocks = self.blocks
        while count > 0 and blocks:
            at, held = blocks.peekitem(-1)
            given = min(held, count)
            if given == held:
                blocks.popitem(-1)
            else:
                blocks[at] = held - given
            self.phantoms -= given
            count -= given

    def _add_phantoms(self, at: float, count: int) -> None:
        if count > 0:
            self.blocks[at] = self.blocks.get(at, 0) + count
            self.phantoms += count

    def _burn(self, now: float, count: int, *, exhausted: bool) -> None:
        if not exhausted:
            # Spent by someone else within the server's window: gone for a period at most.
            self._add_phantoms(now + self.period, count)
            return
        soonest = self._soonest(ours_only=True)
        if soonest < math.inf:
            # Our own oldest request leaving the window frees one: it is the probe.
            self._add_phantoms(soonest + self.period, count)
        else:
            # All spent by others: one probe a period from now, the rest held until the
            # probe's answer hands them back.
            self._add_phantoms(now + self.period, 1)
            self._add_phantoms(now + 2 * self.period, count - 1)

    def view(self, now: float) -> LedgerView:
        self.expire(now)
        soonest = self._soonest()
        next_in = None if soonest == math.inf else soonest - now
        return LedgerView(self.limit, len(self.units) + self.phantoms, self.phantoms, next_in)
