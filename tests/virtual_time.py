"""Virtual time: a test's coroutine on a loop whose clock jumps over every wait, so hours
pass in milliseconds, on every Python the package supports.

The loop's clock starts at 0 and moves only when nothing is ready to run: then it jumps to
the next timer, after one look at the sockets (and a short real wait when another thread
or a socket may still answer), so I/O on loopback and work in threads are waited for, not
jumped over. An explicit loop rather than a pytest plugin: it does not mix with the loops
of pytest-asyncio, and it is closed when the test ends.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["VirtualTimeLoop", "run_virtual", "virtual_time"]

T = TypeVar("T")

# A real wait before a jump, while a socket or a thread may still deliver something.
SETTLE = 0.002


class _JumpingSelector(selectors.DefaultSelector):
    """The loop's selector: a wait with nothing to read becomes a jump of the loop's clock."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready: list[tuple[selectors.SelectorKey, int]] = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # no timer: only I/O or a thread can wake the loop
            return list(super().select(None))
        if self._loop.busy_threads() or len(self.get_map()) > 1:  # more than the self-pipe
            ready = super().select(min(timeout, SETTLE))
            if ready or self._loop.busy_threads():
                return ready
        self._loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose `time()` is virtual: it jumps to the next timer when idle."""

    def __init__(self) -> None:
        self._now = 0.0
        self._threads: set[asyncio.Future[Any]] = set()
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += max(seconds, 0.0)

    def busy_threads(self) -> bool:
        self._threads = {f for f in self._threads if not f.done()}
        return bool(self._threads)

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self._threads.add(future)
        return future


def run_virtual(scenario: Callable[[], Awaitable[T]]) -> T:
    """Run `scenario()` to its end in virtual time; its result."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(scenario())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


def virtual_time(test: Callable[[], Awaitable[object]]) -> Callable[[], None]:
    """Decorate an async test to run in virtual time (a plain test for pytest)."""

    def run() -> None:
        run_virtual(test)

    run.__name__ = test.__name__
    run.__doc__ = test.__doc__
    return run
