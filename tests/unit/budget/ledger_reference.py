"""The rate ledger's rule written the straightforward way, for property tests of the
indexed `MemoryLedger` (they must agree on every grant, refusal and view)."""

from __future__ import annotations

from invoicing_async._budget.ledger import Grant, LedgerView, Refusal, Unit, new_unit_id

__all__ = ["ReferenceLedger"]


class ReferenceLedger:
    """The ledger as it was written first: every operation scans every unit held (O(n)).

    Kept as the executable statement of the rule that `MemoryLedger` must follow."""

    def __init__(self, limit: int, period: float) -> None:
        self.limit = limit
        self.period = period
        self.units: dict[str, Unit] = {}
        self.phantoms: list[float] = []  # each phantom's return time
        self.heard: dict[str, int] = {}  # the server's remaining in each unit's answer

    def expire(self, now: float) -> None:
        """Forget units that have come back."""
        for unit_id in [u.id for u in self.units.values() if u.returns_at <= now]:
            del self.units[unit_id]
        self.phantoms = [at for at in self.phantoms if at > now]

    def take(self, now: float, *, hold: float, keep: int = 0) -> Grant | Refusal:
        """Take a unit if more than `keep` are free; else say when one will be."""
        self.expire(now)
        in_use = len(self.units) + len(self.phantoms)
        if self.limit - in_use > keep:
            unit = Unit(new_unit_id(), now, now + self.period + hold)
            self.units[unit.id] = unit
            return Grant(unit.id, now)
        # Units that must come back before more than `keep` are free.
        needed = in_use - (self.limit - keep - 1)
        returns = sorted([u.returns_at for u in self.units.values()] + self.phantoms)
        at = returns[needed - 1]
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
            self.units[unit_id] = unit._replace(returns_at=min(unit.returns_at, now + self.period))
        if remaining is not None:
            self.heed_server(now, unit_id, taken_at, remaining)

    def heed_server(self, now: float, unit_id: str, taken_at: float, remaining: int) -> None:
        """Fit the free units to the server's word on the request taken at `taken_at`."""
        if unit_id in self.units:
            self.heard[unit_id] = remaining
        # Requests taken after that one may not have been counted in `remaining` yet:
        # assume they were not, unless their own answer showed more remaining (counted
        # first). Those taken at the same instant count as before it.
        after = sum(
            1
            for u in self.units.values()
            if u.taken_at > taken_at
            and u.id != unit_id
            and self.heard.get(u.id, remaining) <= remaining
        )
        allowed = remaining - after
        free = self.limit - len(self.units) - len(self.phantoms)
        if free > allowed:
            self._burn(now, free - max(0, allowed), exhausted=allowed <= 0)
        elif free < allowed:
            self.phantoms = sorted(self.phantoms, reverse=True)[allowed - free :]

    def _burn(self, now: float, count: int, *, exhausted: bool) -> None:
        if count <= 0:
            return
        if not exhausted:
            # Spent by someone else within the server's window: gone for a period at most.
            at: list[float] = [now + self.period] * count
        else:
            real = [u.returns_at for u in self.units.values()]
            if real:
                # Our own oldest request leaving the window frees one: it is the probe.
                at = [min(real) + self.period] * count
            else:
                # All spent by others: one probe a period from now, the rest held until the
                # probe's answer hands them back.
                at = [now + self.period] + [now + 2 * self.period] * (count - 1)
        self.phantoms.extend(at)

    def view(self, now: float) -> LedgerView:
        self.expire(now)
        returns = [u.returns_at for u in self.units.values()] + self.phantoms
        next_in = min(returns) - now if returns else None
        in_use = len(self.units) + len(self.phantoms)
        return LedgerView(self.limit, in_use, len(self.phantoms), next_in)
