"""When and how long to wait before trying a failed request again.

Idempotent methods (GET, PUT, DELETE) are retried after connection errors, timeouts and
500/502/503/504. POST is retried only when the connection could not be opened at all,
so a POST that may have reached the service is never sent twice.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs

__all__ = ["IDEMPOTENT_METHODS", "RETRY_STATUSES", "RetryPolicy"]

IDEMPOTENT_METHODS = frozenset({"GET", "PUT", "DELETE", "HEAD", "OPTIONS"})
RETRY_STATUSES = frozenset({500, 502, 503, 504})


@attrs.frozen
class RetryPolicy:
    """Exponential backoff with full jitter, capped in attempts and in total time.

    `attempts` counts the first try: `attempts=1` disables retries. The delay before
    retry n (1-based) is uniform in [0, min(max_delay, base_delay * 2**(n-1))].
    """

    attempts: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_total: float = 60.0
    jitter: bool = True
    rng: Callable[[], float] = attrs.field(default=random.random, repr=False, eq=False)

    @classmethod
    def none(cls) -> RetryPolicy:
        """No retries at all."""
        return cls(attempts=1)

    def retries_status(self, method: str, status: int) -> bool:
        return method in IDEMPOTENT_METHODS and status in RETRY_STATUSES

    def retries_error(self, method: str, *, connected: bool) -> bool:
        """After a transport error: `connected` is False when no connection was opened."""
        return method in IDEMPOTENT_METHODS or not connected

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to sleep before retry number `retry` (1-based)."""
        cap = min(self.max_delay, self.base_delay * 2.0 ** (retry - 1))
        wait = cap * self.rng() if self.jitter else cap
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_delay))
        return wait
