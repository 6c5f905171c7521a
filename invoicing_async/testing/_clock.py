"""A clock the tests control: "late" invoices and the hourly window without waiting."""

from __future__ import annotations

import datetime as dt
import time


class FakeClock:
    """Wall-clock time plus an offset the test moves with `advance` or `set` (`monotonic()`
    too, so the fake service's rate window follows it)."""

    def __init__(self, start: dt.datetime | None = None, *, frozen: bool = False) -> None:
        self._frozen = frozen
        self._base_real = time.time()
        self._base_mono = time.monotonic()
        self.set(start or dt.datetime.now(dt.timezone.utc))

    def _real(self) -> float:
        return self._base_real if self._frozen else time.time()

    def timestamp(self) -> float:
        return self._real() + self._offset

    def now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.timestamp(), dt.timezone.utc)

    def today(self) -> dt.date:
        return self.now().date()

    def monotonic(self) -> float:
        if self._frozen:
            return self._base_mono + self._offset
        return time.monotonic() + self._offset

    def advance(self, seconds: float = 0.0, *, days: float = 0.0) -> None:
        self._offset += seconds + days * 86400.0

    def set(self, when: dt.datetime) -> None:
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        self._offset = when.timestamp() - self._real()
