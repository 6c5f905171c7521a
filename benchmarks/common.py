"""What the benchmarks share: the result record and a best-of-N timer."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs


@attrs.frozen
class Result:
    """One figure: ours, the bound or baseline it is compared with, and whether it is met.

    `ratio` is ours / baseline; `target` is the largest (or smallest, when
    `higher_is_better`) ratio that meets the goal.
    """

    name: str
    ours: float
    baseline: float
    unit: str
    target: float
    higher_is_better: bool = False
    note: str = ""
    informational: bool = False  # no target was set: reported, not judged

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline if self.baseline else float("inf")

    @property
    def met(self) -> bool:
        if self.informational:
            return True
        return self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target

    def as_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data.update(ratio=round(self.ratio, 4), met=self.met)
        return data


def paired_timings(
    ours: Callable[[], object], baseline: Callable[[], object], *, repeat: int = 25
) -> tuple[list[float], list[float]]:
    """Seconds of each run of `ours` and of `baseline`, run in turns (collector paused), so
    a busy spell of a shared machine lands on both sides alike."""
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(repeat):
        theirs.append(_timed(baseline))
        mine.append(_timed(ours))
    return mine, theirs


def best_of(fn: Callable[[], object], *, repeat: int = 25) -> float:
    """The fastest of `repeat` runs, in seconds: the least disturbed by a shared machine.

    The garbage collector is paused while timing (for ours and the baseline alike), so a
    collection triggered by earlier allocations does not land on one side by chance.
    """
    return min(_timed(fn) for _ in range(repeat))


def _timed(fn: Callable[[], object]) -> float:
    """Seconds of one run of `fn`, the collector paused (after a collection) meanwhile."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


async def in_flight(count: int, call: Callable[[int], Awaitable[object]], width: int) -> None:
    """`call(0)` ... `call(count - 1)`, `width` of them in flight at a time."""
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            await call(i)

    await asyncio.gather(*(worker() for _ in range(width)))
