"""Virtual time: a test's coroutine on a looptime loop, whose clock jumps over every wait, so
hours pass in milliseconds.

An explicit loop rather than looptime's pytest plugin: it cannot mix with the loops of
pytest-asyncio, and it is closed when the test ends. looptime installs on Python 3.11+
only: on 3.10 the tests that need it are skipped, with that reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

__all__ = ["run_virtual", "virtual_time"]

T = TypeVar("T")


def run_virtual(scenario: Callable[[], Awaitable[T]]) -> T:
    """Run `scenario()` to its end in virtual time; its result."""
    looptime = pytest.importorskip("looptime", reason="looptime installs on Python 3.11+ only")
    loop = looptime.new_event_loop()
    try:
        return loop.run_until_complete(scenario())  # type: ignore[no-any-return]
    finally:
        loop.close()


def virtual_time(test: Callable[[], Awaitable[object]]) -> Callable[[], None]:
    """Decorate an async test to run in virtual time (a plain test for pytest)."""

    def run() -> None:
        run_virtual(test)

    run.__name__ = test.__name__
    run.__doc__ = test.__doc__
    return run
