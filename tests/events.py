"""Waiting for an event in a test: `until(condition)` returns once it holds.

The loop turns between looks, so the code under test runs; the guard only ends a hung
test (a minute), it never measures: a slow machine takes longer and still passes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["until"]

GUARD = 60.0  # seconds: a hang, not a slow machine
LOOK = 0.01  # seconds between looks


async def until(condition: Callable[[], object], what: str, *, guard: float = GUARD) -> None:
    """Return once `condition()` is true; fail naming `what` if it never is (a hang)."""
    for _ in range(int(guard / LOOK)):
        if condition():
            return
        await asyncio.sleep(LOOK)
    raise AssertionError(f"never happened: {what}")
