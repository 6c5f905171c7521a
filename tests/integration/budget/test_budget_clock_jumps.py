"""The wall clock stepping forward and back (NTP, a VM resumed, an operator) while a
budget is in use (issue 37): the limit must still hold in true time."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

import invoicing_async as ia
from invoicing_async._budget.budget import spender_of
from invoicing_async._budget.sqlite import SQLiteBudgetStore
from invoicing_async.sync import MemoryStore, SyncEngine
from invoicing_async.testing import FakeInvoicingService
from tests.virtual_time import virtual_time

HOUR = 3600.0


async def spend(budget: ia.RateBudget, max_wait: float | None = 0) -> None:
    spender = spender_of(budget)
    permit = await spender.take(max_wait=max_wait)
    await spender.settle(permit, limit=None, remaining=None)


def busiest(times: list[float], period: float) -> int:
    """The most of `times` in any window of `period` seconds."""
    return max(sum(1 for t in times if start <= t < start + period) for start in times)


def jumping_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """`time.time()` an hour ahead, then an hour behind, then right, in turns."""
    real = time.time
    steps = itertools.cycle((HOUR, -HOUR, 0.0))
    monkeypatch.setattr(time, "time", lambda: real() + next(steps))


def test_an_in_process_budget_and_a_sync_run_keep_the_limit_while_the_wall_clock_jumps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The budget is timed by the event loop's monotonic clock, the run's wall-clock uses
    (quarantine, the recheck of fresh revisions) cannot spend more: 5 requests a minute,
    a run of 12 requests, the wall clock stepping an hour either way at every reading."""

    @virtual_time
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        sent: list[float] = []
        async with FakeInvoicingService(tls=False, invoices=1000, seed=2) as service:
            jumping_wall_clock(monkeypatch)
            budget = ia.RateBudget(limit=5, period=60.0)

            def hook(_: ia.RequestEvent) -> None:
                sent.append(loop.time())

            async with service.client(format="json", budget=budget, on_request=hook) as client:
                engine = SyncEngine(client, MemoryStore(), wait_for_budget=True, clock=time.time)
                report = await engine.run()
        assert (report.complete, report.created) == (True, 1000)
        assert len(sent) == report.requests == 11
        assert busiest(sent, 60.0) == 5

    scenario()


@pytest.mark.parametrize(
    "steps",
    [
        {30: -HOUR},  # back: units come back late, never early
        {30: -HOUR, 45: 0.0},
        {30: HOUR},  # ahead mid-window: the units of the window before stay out
        {1: HOUR, 2: 0.0, 3: HOUR, 4: 0.0},
        {0: HOUR, 100: 0.0},  # the file dated by a wall clock an hour ahead
    ],
)
async def test_a_shared_sqlite_budget_keeps_the_limit_when_the_machines_clock_steps(
    tmp_path: Path, steps: dict[int, float]
) -> None:
    """Two processes on one file, on one machine whose wall clock steps (at the given
    true second, to the given offset) while its steady clock runs on: no more than the
    limit in any true window."""
    true, offset = [1_000_000.0], [0.0]
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    stores = [
        SQLiteBudgetStore(url, clock=lambda: true[0] + offset[0], steady=lambda: ("b", true[0]))
        for _ in range(2)
    ]
    budgets = [ia.RateBudget(10, 60.0, key="acme", store=store) for store in stores]
    granted: list[float] = []
    for second in range(300):
        offset[0] = steps.get(second, offset[0])
        for budget in budgets:
            for _ in range(3):
                try:
                    await spend(budget)
                except ia.RateLimitExceeded:
                    break
                granted.append(true[0])
        true[0] += 1.0
    for store in stores:
        await store.close()
    assert busiest(granted, 60.0) <= 10
    assert len(granted) == 50  # and no share lost: the limit in each of the five minutes


@pytest.mark.parametrize("boots", [("a", "b"), ("", "")], ids=["boot id", "no boot id"])
async def test_units_held_across_a_reboot_come_back_late_never_early(
    tmp_path: Path, boots: tuple[str, str]
) -> None:
    """The machine restarts (a new boot id, or none to read and its steady clock begun
    again) and its wall clock says an hour later: the file's time goes on from the last
    time written, so the units held come back as if no time had passed, within a period."""
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    before, after = [0.0], [0.0]
    first = SQLiteBudgetStore(
        url, clock=lambda: 1_000_000.0 + before[0], steady=lambda: (boots[0], 5000.0 + before[0])
    )
    budget = ia.RateBudget(10, 60.0, key="acme", store=first)
    for _ in range(10):  # one a second: the last one at 9 s, back at 69 s
        await spend(budget)
        before[0] += 1.0
    await first.close()
    second = SQLiteBudgetStore(
        url, clock=lambda: 1_000_000.0 + HOUR, steady=lambda: (boots[1], 20.0 + after[0])
    )
    budget = ia.RateBudget(10, 60.0, key="acme", store=second)
    with pytest.raises(ia.RateLimitExceeded):
        await spend(budget)  # the file's time is 9 s: none back
    after[0] = 50.5
    with pytest.raises(ia.RateLimitExceeded):
        await spend(budget)
    after[0] = 51.0  # 60 s: the first unit is back, the second one is not
    await spend(budget)
    with pytest.raises(ia.RateLimitExceeded):
        await spend(budget)
    await second.close()
