"""The service's hourly request limit per account: fixed or sliding window."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Literal

WindowRule = Literal["fixed", "sliding"]


class RequestWindow:
    """Counts an account's requests; `take()` is False once `limit` are spent."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        limit: int = 350,
        period: float = 3600.0,
        rule: WindowRule = "fixed",
    ) -> None:
        self.limit = limit
        self.period = period
        self.rule = rule
        self._clock = clock
        self._times: collections.deque[float] = collections.deque()
        self._window_start: float | None = None
        self._count = 0

    def _roll(self) -> None:
        now = self._clock()
        if self.rule == "sliding":
            cutoff = now - self.period
            while self._times and self._times[0] <= cutoff:
                self._times.popleft()
        elif self._window_start is None or now - self._window_start >= self.period:
            self._window_start = now
            self._count = 0

    @property
    def used(self) -> int:
        self._roll()
        return len(self._times) if self.rule == "sliding" else self._count

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def take(self) -> bool:
        """Count one request; False (not counted) when the window is spent."""
        if self.remaining <= 0:
            return False
        if self.rule == "sliding":
            self._times.append(self._clock())
        else:
            self._count += 1
        return True
