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

`MemoryLedger` holds this state in a process; the SQLite store loads it into one and
writes it back in a transaction; PostgreSQL and Redis run the same rule server-side
(`budget_postgres`, `budget_redis`), tested against this one.
"""

from __future__ import annotations

import uuid

import attrs

__all__ = ["Grant", "LedgerView", "MemoryLedger", "Refusal", "Unit", "new_unit_id"]


def new_unit_id(phantom: bool = False) -> str:
    """A unit's id; phantom ids start with "p" (the native backends rely on this)."""
    return ("p" if phantom else "r") + uuid.uuid4().hex[:16]


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
    returns_in: tuple[float, ...]  # sorted, relative to the ledger's now

    @property
    def free(self) -> int:
        return max(0, self.limit - self.in_use)


class MemoryLedger:
    """The ledger's state for one budget key, with the rule applied in Python."""

    def __init__(self, limit: int, period: float, units: dict[str, Unit] | None = None) -> None:
        self.limit = limit
        self.period = period
        self.units: dict[str, Unit] = units if units is not None else {}

    def expire(self, now: float) -> None:
        """Forget units that have come back."""
        for unit_id in [u.id for u in self.units.values() if u.returns_at <= now]:
            del self.units[unit_id]

    def take(self, now: float, *, hold: float, keep: int = 0) -> Grant | Refusal:
        """Take a unit if more than `keep` are free; else say when one will be."""
        self.expire(now)
        in_use = len(self.units)
        if self.limit - in_use > keep:
            unit = Unit(new_unit_id(), now, now + self.period + hold)
            self.units[unit.id] = unit
            return Grant(unit.id, now)
        # Units that must come back before more than `keep` are free.
        needed = in_use - (self.limit - keep - 1)
        returns = sorted(u.returns_at for u in self.units.values())
        at = returns[needed - 1] if needed <= len(returns) else now + self.period
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
            self.units.pop(unit_id, None)
            return
        if unit is not None:
            unit.returns_at = min(unit.returns_at, now + self.period)
        if remaining is not None:
            self.heed_server(now, unit_id, taken_at, remaining)

    def heed_server(self, now: float, unit_id: str, taken_at: float, remaining: int) -> None:
        """Fit the free units to the server's word on the request taken at `taken_at`."""
        # Requests taken after that one (or at the same instant) may not have been counted
        # in `remaining` yet: assume they were not.
        after = sum(
            1
            for u in self.units.values()
            if not u.phantom and u.taken_at >= taken_at and u.id != unit_id
        )
        allowed = remaining - after
        free = self.limit - len(self.units)
        if free > allowed:
            self._burn(now, free - max(0, allowed), exhausted=allowed <= 0)
        elif free < allowed:
            phantoms = sorted(
                (u for u in self.units.values() if u.phantom), key=lambda u: -u.returns_at
            )
            for unit in phantoms[: allowed - free]:
                del self.units[unit.id]

    def _burn(self, now: float, count: int, *, exhausted: bool) -> None:
        if count <= 0:
            return
        if not exhausted:
            # Spent by someone else within the server's window: gone for a period at most.
            at: list[float] = [now + self.period] * count
        else:
            real = [u.returns_at for u in self.units.values() if not u.phantom]
            if real:
                # Our own oldest request leaving the window frees one: it is the probe.
                at = [min(real) + self.period] * count
            else:
                # All spent by others: one probe a period from now, the rest held until the
                # probe's answer hands them back.
                at = [now + self.period] + [now + 2 * self.period] * (count - 1)
        for returns_at in at:
            unit = Unit(new_unit_id(phantom=True), now, returns_at)
            self.units[unit.id] = unit

    def view(self, now: float) -> LedgerView:
        self.expire(now)
        returns = tuple(sorted(u.returns_at - now for u in self.units.values()))
        phantoms = sum(1 for u in self.units.values() if u.phantom)
        return LedgerView(self.limit, len(self.units), phantoms, returns)
