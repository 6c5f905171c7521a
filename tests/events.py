"""Waiting for an event in a test: `until(condition)` returns once it holds.

A condition may be a coroutine function (one that reads a database off the loop, say):
its result is awaited.

The loop turns between looks, so the code under test runs; the guard only ends a hung
test (a minute), it never measures: a slow machine takes longer and still passes.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

__all__ = ["DB_LOOK", "until"]

GUARD = 60.0  # seconds: a hang, not a slow machine
LOOK = 0.01  # seconds between looks
DB_LOOK = 0.05  # seconds between looks that each cost a database query


async def until(
    condition: Callable[[], object], what: str, *, guard: float = GUARD, look: float = LOOK
) -> None:
    """Return once `condition()` is true (awaited if it is awaitable); fail naming `what`
    if it never is (a hang). A condition that costs a query looks less often (`look`)."""
    for _ in range(int(guard / look)):
        seen = condition()
        if inspect.isawaitable(seen):
            seen = await seen
        if seen:
            return
        await asyncio.sleep(look)
    raise AssertionError(f"never happened: {what}")
