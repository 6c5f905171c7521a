"""When and how long to wait before trying a failed request again.

Only what is safe to repeat is: GET, DELETE (a 404 on a retry counts as done) and a PUT
that only sets attributes, after connection errors, timeouts and 500/502/503/504. Other
PUTs and every POST are retried only when the connection could not be opened at all."""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs

__all__ = ["REPEATABLE_METHODS", "RETRY_STATUSES", "RetryPolicy", "is_repeatable"]

# Methods whose repetition has the effect of doing them once.
REPEATABLE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
RETRY_STATUSES = frozenset({500, 502, 503, 504})


def is_repeatable(method: str, *, idempotent: bool = False) -> bool:
    """Whether sending the request again has the effect of sending it once: the methods
    of `REPEATABLE_METHODS`, and a PUT whose caller marked it `idempotent`."""
    return method in REPEATABLE_METHODS or (idempotent and method == "PUT")


@attrs.frozen
class RetryPolicy:
    """Exponential backoff with full jitter, capped in attempts (the first try included) and
    total time: retry n waits uniform in [0, min(max_delay, base_delay * 2**(n-1))]."""

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

    def retries_status(self, method: str, status: int, *, idempotent: bool = False) -> bool:
        return is_repeatable(method, idempotent=idempotent) and status in RETRY_STATUSES

    def retries_error(self, method: str, *, connected: bool, idempotent: bool = False) -> bool:
        """After a transport error: `connected` is False when no connection was opened."""
        return is_repeatable(method, idempotent=idempotent) or not connected

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to sleep before retry number `retry` (1-based)."""
        cap = min(self.max_delay, self.base_delay * 2.0 ** (retry - 1))
        wait = cap * self.rng() if self.jitter else cap
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_delay))
        return wait
