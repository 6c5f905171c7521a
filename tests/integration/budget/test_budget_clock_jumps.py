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
        pytest.param(
            {30: HOUR},
            marks=pytest.mark.xfail(
                strict=True,
                reason="the file's time follows a wall clock that steps ahead: the units of "
                "the window before the step come back at once (20 in 60 s for a limit of 10)",
            ),
        ),
        pytest.param(
            {1: HOUR, 2: 0.0, 3: HOUR, 4: 0.0},
            marks=pytest.mark.xfail(strict=True, reason="as above: 22 in 60 s for a limit of 10"),
        ),
    ],
)
async def test_a_shared_sqlite_budget_keeps_the_limit_when_the_machines_clock_steps(
    tmp_path: Path, steps: dict[int, float]
) -> None:
    """Two processes on one file, on one machine whose wall clock steps (at the given
    true second, to the given offset): no more than the limit in any true window."""
    true, offset = [1_000_000.0], [0.0]
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    stores = [SQLiteBudgetStore(url, clock=lambda: true[0] + offset[0]) for _ in range(2)]
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
    assert granted
    assert busiest(granted, 60.0) <= 10
