"""Shared budgets: the same rule in every store (SQLite, PostgreSQL, Redis), checked
against the in-process ledger, on real servers the suite starts itself.

Hours are not waited for here: the period is an hour and the tests look at what the
ledger lends and refuses, which needs no waiting. Two `RateBudget`s with their own store
objects stand for two processes (separate connections);
tests/stress/budget/test_budget_processes.py runs real processes.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import random
import socket
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

import invoicing_async as ia
from invoicing_async._budget.budget import spender_of
from invoicing_async._budget.ledger import Grant
from invoicing_async._budget.sqlite import SQLiteBudgetStore, sqlite_path
from invoicing_async._budget.stores import MemoryBudgetStore

HOUR = 3600.0


@pytest.fixture
async def make_budget(shared_budget_url: str) -> AsyncIterator[Callable[..., ia.RateBudget]]:
    """Budgets on one shared URL, each with its own connection (a process of its own)."""
    made: list[ia.RateBudget] = []

    def make(limit: int = 20, **kwargs: object) -> ia.RateBudget:
        budget = ia.RateBudget(limit, HOUR, shared=shared_budget_url, key="acme", **kwargs)  # type: ignore[arg-type]
        made.append(budget)
        return budget

    yield make
    for budget in made:
        await budget.close()


async def spend(budget: ia.RateBudget, **kwargs: object) -> Grant:
    permit = await spender_of(budget).take(max_wait=0, **kwargs)  # type: ignore[arg-type]
    await spender_of(budget).settle(permit, limit=None, remaining=None)
    return permit


async def test_the_whole_limit_at_once_then_refused_for_about_an_hour(
    make_budget: Callable[..., ia.RateBudget],
) -> None:
    budget = make_budget(limit=20)
    for _ in range(20):
        await spend(budget)
    with pytest.raises(ia.RateLimitExceeded) as info:
        await spender_of(budget).take(max_wait=10)
    assert info.value.retry_after == pytest.approx(HOUR, abs=5)
    assert budget.shared
    assert (await budget.refresh()).used_in_period == 20


async def test_processes_share_the_units_and_a_restart_keeps_them(
    make_budget: Callable[..., ia.RateBudget],
) -> None:
    first = make_budget(limit=20)
    for _ in range(12):
        await spend(first)
    await first.close()  # the process ends mid-hour
    again, other = make_budget(limit=20), make_budget(limit=20)
    assert (await again.refresh()).remaining == 8  # the restart does not spend them again
    results = await asyncio.gather(*(spend(b) for b in [again, other] * 10), return_exceptions=True)
    granted = [r for r in results if isinstance(r, Grant)]
    refused = [r for r in results if isinstance(r, ia.RateLimitExceeded)]
    assert (len(granted), len(refused)) == (8, 12)


async def test_a_unit_that_never_left_comes_back(make_budget: Callable[..., ia.RateBudget]) -> None:
    budget = make_budget(limit=2)
    permit = await spender_of(budget).take(max_wait=0)
    await spender_of(budget).settle(permit, sent=False)
    await spend(budget)
    await spend(budget)
    with pytest.raises(ia.RateLimitExceeded):
        await spender_of(budget).take(max_wait=0)


async def test_a_refusal_for_the_budget_stops_every_process(
    make_budget: Callable[..., ia.RateBudget],
) -> None:
    web, batch = make_budget(limit=20), make_budget(limit=20)
    permit = await spender_of(batch).take(max_wait=0)
    wait = await spender_of(batch).settle(permit, refused=True)
    assert wait is not None
    assert 0 < wait <= HOUR + 5
    with pytest.raises(ia.RateLimitExceeded):
        await spender_of(web).take(max_wait=0)
    snap = await web.refresh()
    assert (snap.remaining, snap.used_in_period, snap.held_for_others) == (0, 1, 19)


async def test_the_servers_word_holds_units_and_hands_them_back(
    make_budget: Callable[..., ia.RateBudget],
) -> None:
    budget = make_budget(limit=20)
    permit = await spender_of(budget).take(max_wait=0)
    await spender_of(budget).settle(permit, limit=20, remaining=5)
    snap = await budget.refresh()
    assert (snap.remaining, snap.held_for_others) == (5, 14)
    later = await spender_of(budget).take(max_wait=0)
    await spender_of(budget).settle(later, limit=20, remaining=10)
    assert (await budget.refresh()).remaining == 10


async def test_answers_counted_out_of_taking_order_hold_back_no_unit(
    make_budget: Callable[..., ia.RateBudget], caplog: pytest.LogCaptureFixture
) -> None:
    """Four requests the server counts newest first, answered in that order: every store,
    as the in-process ledger, holds nothing back for newer requests counted first (and
    takes every answer: no "budget not updated" warning)."""
    budget = make_budget(limit=8)
    permits = [await spender_of(budget).take(max_wait=0) for _ in range(4)]
    assert len({permit.taken_at for permit in permits}) == 4
    for remaining, permit in zip([7, 6, 5, 4], reversed(permits), strict=True):
        await spender_of(budget).settle(permit, limit=8, remaining=remaining)
    snap = await budget.refresh()
    assert (snap.remaining, snap.used_in_period, snap.held_for_others) == (4, 4, 0)
    for _ in range(4):
        await spend(budget)
    with pytest.raises(ia.RateLimitExceeded):
        await spender_of(budget).take(max_wait=0)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_background_work_stops_short_of_the_reserve(
    make_budget: Callable[..., ia.RateBudget],
) -> None:
    sync, web = make_budget(limit=10, reserve=4), make_budget(limit=10, reserve=4)
    for _ in range(6):
        await spend(sync, background=True)
    with pytest.raises(ia.RateLimitExceeded, match="reserve"):
        await spender_of(sync).take(max_wait=0, background=True)
    for _ in range(4):
        await spend(web)
    with pytest.raises(ia.RateLimitExceeded):
        await spender_of(web).take(max_wait=0)


async def test_phantoms_are_one_counted_block_in_every_store(
    make_budget: Callable[..., ia.RateBudget], shared_budget_url: str
) -> None:
    """A 100,000 budget told that 349 of 350 are left: one stored block of 99,650."""
    budget = make_budget(limit=100_000)
    permit = await spender_of(budget).take(max_wait=0)
    await spender_of(budget).settle(permit, limit=350, remaining=349)
    assert (await budget.refresh()).held_for_others == 99_650
    if shared_budget_url.startswith("sqlite"):
        with contextlib.closing(sqlite3.connect(sqlite_path(shared_budget_url))) as db:
            blocks = db.execute("SELECT count(*), sum(count) FROM budget_phantoms").fetchone()
    elif shared_budget_url.startswith("postgresql"):
        import psycopg

        async with await psycopg.AsyncConnection.connect(shared_budget_url) as conn:
            cursor = await conn.execute(
                "SELECT count(*), sum(count) FROM invoicing_budget_phantoms"
            )
            blocks = await cursor.fetchone()
    else:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(shared_budget_url)
        sizes = await client.hgetall("{invoicing:budget:acme}:sizes")
        await client.aclose()
        blocks = (len(sizes) - 1, int(sizes[b"all"]))
    assert tuple(blocks) == (1, 99_650)


async def test_many_concurrent_takers_never_get_more_than_the_limit(
    make_budget: Callable[..., ia.RateBudget],
) -> None:
    budgets = [make_budget(limit=25) for _ in range(3)]

    async def caller(budget: ia.RateBudget) -> int:
        taken = 0
        while True:
            try:
                await spender_of(budget).take(max_wait=0)
            except ia.RateLimitExceeded:
                return taken
            taken += 1

    counts = await asyncio.gather(*(caller(b) for b in budgets for _ in range(20)))
    assert sum(counts) == 25


async def test_every_store_follows_the_in_process_rule(
    make_budget: Callable[..., ia.RateBudget],
) -> None:
    """A random run of takes, refusals and answers: same grants and counts as the ledger."""
    rng = random.Random(11)
    ticks = iter(range(1, 10**6))
    clock = MemoryBudgetStore(lambda: next(ticks) / 1000)
    reference = ia.RateBudget(20, HOUR, reserve=3, store=clock)
    shared = make_budget(limit=20, reserve=3)
    out: list[tuple[Grant, Grant]] = []
    for step in range(300):
        action = rng.random()
        if action < 0.5 or not out:
            background = rng.random() < 0.5
            got: list[Grant | None] = []
            for budget in (reference, shared):
                try:
                    got.append(await spender_of(budget).take(max_wait=0, background=background))
                except ia.RateLimitExceeded:
                    got.append(None)
            assert (got[0] is None) == (got[1] is None), step
            if got[0] is not None and got[1] is not None:
                out.append((got[0], got[1]))
        else:
            ref_permit, shared_permit = out.pop(rng.randrange(len(out)))
            sent = rng.random() < 0.9
            remaining = rng.choice([None, None, 0, 1, 3, 8, 15, 20])
            if not sent:
                await spender_of(reference).settle(ref_permit, sent=False)
                await spender_of(shared).settle(shared_permit, sent=False)
            else:
                await spender_of(reference).settle(ref_permit, limit=20, remaining=remaining)
                await spender_of(shared).settle(shared_permit, limit=20, remaining=remaining)
        ref, got_snap = reference.snapshot(), await shared.refresh()
        assert (got_snap.remaining, got_snap.used_in_period, got_snap.held_for_others) == (
            ref.remaining,
            ref.used_in_period,
            ref.held_for_others,
        ), step


@pytest.fixture
def frozen_port() -> Iterator[int]:
    """A server that accepts connections and never answers (a frozen process)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


@pytest.mark.parametrize("scheme", ["postgresql://postgres@", "redis://"])
async def test_a_frozen_or_missing_server_fails_closed_in_bounded_time(
    scheme: str, frozen_port: int
) -> None:
    for port in (frozen_port, _closed_port()):
        budget = ia.RateBudget(shared=f"{scheme}127.0.0.1:{port}/0", key="acme", store_timeout=1)
        with pytest.raises(ia.BudgetUnavailableError, match="the request was not sent") as info:
            await spender_of(budget).take(max_wait=None)
        # The frozen server ends in the store timeout, the closed port at its refusal.
        assert ("did not answer within 1s" in str(info.value)) == (port == frozen_port)
        await budget.close()


async def test_a_locked_sqlite_file_fails_closed_in_bounded_time(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    budget = ia.RateBudget(shared=url, key="acme", store_timeout=0.5)
    await spend(budget)
    holder = sqlite3.connect(tmp_path / "budget.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(ia.BudgetUnavailableError, match=r"budget\.db.*not sent") as info:
            await spender_of(budget).take(max_wait=None)
        # Ended by a 0.5 s bound, no hang: the store's own timeout or SQLite's busy timeout
        # (the connection's, set to the same 0.5 s), whichever fires first.
        assert any(
            why in str(info.value) for why in ("did not answer within 0.5s", "database is locked")
        ), info.value
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    await spend(budget)  # works again once the lock is gone
    await budget.close()


async def test_a_shared_budget_serves_one_host_unless_keyed(tmp_path: Path) -> None:
    budget = ia.RateBudget(shared=f"sqlite:///{tmp_path / 'b.db'}")
    auth = ia.BasicAuth("u", "p")
    ia.InvoicingClient("https://acme.example.com", auth=auth, budget=budget)
    assert budget.key == "acme.example.com"
    with pytest.raises(ia.ConfigurationError, match="its own RateBudget"):
        ia.InvoicingClient("https://other.example.com", auth=auth, budget=budget)
    await budget.close()
    # A written port is part of the account's host, as in the accounts table of workers.
    ported = ia.RateBudget(shared=f"sqlite:///{tmp_path / 'p.db'}")
    ia.InvoicingClient("https://acme.example.com:8443", auth=auth, budget=ported)
    assert ported.key == "acme.example.com:8443"
    await ported.close()


def test_a_shared_url_never_shows_its_password() -> None:
    budget = ia.RateBudget(shared="redis://:hunter2@127.0.0.1:1/0", key="k")
    assert "hunter2" not in repr(budget)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stores(
    url: str, true_time: list[float], ahead: str
) -> tuple[SQLiteBudgetStore, SQLiteBudgetStore]:
    """Two processes' stores on one file, the second one's wall clock, or both its wall
    and its steady clock (a faked clock), 2 s ahead of the first one's."""
    lead = {"wall": (2.0, 0.0), "both": (2.0, 2.0)}[ahead]
    return SQLiteBudgetStore(
        url, clock=lambda: true_time[0], steady=lambda: ("boot", true_time[0])
    ), SQLiteBudgetStore(
        url,
        clock=lambda: true_time[0] + lead[0],
        steady=lambda: ("boot", true_time[0] + lead[1]),
    )


async def test_a_process_whose_clock_runs_ahead_lets_no_unit_back_early(tmp_path: Path) -> None:
    """Two processes on one SQLite file, the second one's clock 2 s ahead: within the
    4 s window of the first one's units, it must not take more than the limit."""
    true_time = [1_000_000.0]
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    slow, fast = _stores(url, true_time, "both")
    first = ia.RateBudget(40, 4.0, key="acme", store=slow)
    second = ia.RateBudget(40, 4.0, key="acme", store=fast)
    for _ in range(40):
        await spend(first)
    true_time[0] += 2.5  # the second one's clock says 4.5 s: past the first units' return
    granted = 0
    for _ in range(40):
        try:
            await spend(second)
            granted += 1
        except ia.RateLimitExceeded:
            pass
    assert granted == 0
    true_time[0] += 2.0  # 4.5 s on the first one's clock: their units came back
    await spend(first)
    await spend(second)  # and the file's time, which the first one moved, says so to all
    await slow.close()
    await fast.close()


async def test_a_sqlite_view_sees_the_phantoms_once_none_of_ours_is_out(tmp_path: Path) -> None:
    """Refused for the budget, then our unit back: the phantoms' return is the next one (the
    file answered "nothing out" while phantoms were held)."""
    now = [1_000_000.0]
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    store = SQLiteBudgetStore(url, clock=lambda: now[0], steady=lambda: ("boot", now[0]))
    budget = ia.RateBudget(5, 100.0, key="acme", store=store)
    permit = await spender_of(budget).take(max_wait=0)
    await spender_of(budget).settle(permit, refused=True)  # 4 held until our unit's + 100 s
    now[0] += 150.0  # ours came back 100 s after its answer; the phantoms have 50 s to go
    view = await store.view("acme", budget)
    assert (view.in_use, view.phantoms) == (4, 4)
    assert view.next_in == pytest.approx(50.0)
    await store.close()


async def test_a_process_that_first_opens_the_file_after_a_pause_returns_no_unit_early(
    tmp_path: Path,
) -> None:
    """A second process first using the file 10 s after the last operation on it (time
    that only passed, not a clock ahead): the unit it settles must not come back to the
    first one before the window of its request is over (the bench's 403s with SQLite)."""
    now = [1_000_000.0]
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    first_store = SQLiteBudgetStore(url, clock=lambda: now[0], steady=lambda: ("boot", now[0]))
    later_store = SQLiteBudgetStore(url, clock=lambda: now[0], steady=lambda: ("boot", now[0]))
    first = ia.RateBudget(2, 4.0, key="acme", store=first_store)
    later = ia.RateBudget(2, 4.0, key="acme", store=later_store)
    await spend(first)  # back at +4 s
    now[0] += 10.0
    await spend(later)  # sent and answered now: its window at the server runs to +14 s
    now[0] += 0.1
    await spend(first)  # the first unit, back since +4 s
    with pytest.raises(ia.RateLimitExceeded):
        await spend(first)  # the later one's unit is not back for 4 s
    await first_store.close()
    await later_store.close()


async def test_a_frozen_sqlite_lock_holder_leaves_the_default_thread_pool_free(
    tmp_path: Path,
) -> None:
    """Budget callers stuck behind a held lock must not delay unrelated `to_thread` work."""
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    budget = ia.RateBudget(shared=url, key="acme", store_timeout=2.0)
    await spend(budget)
    holder = sqlite3.connect(tmp_path / "budget.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        stuck = [asyncio.ensure_future(spender_of(budget).take(max_wait=None)) for _ in range(40)]
        for _ in range(10):
            await asyncio.sleep(0)  # the takers start and block on the file's lock
        await asyncio.to_thread(lambda: None)
        # Done while every taker still waits (they give up at the 2 s store timeout): the
        # default pool was free, not exhausted by them.
        assert not any(task.done() for task in stuck)
        results = await asyncio.gather(*stuck, return_exceptions=True)
        assert all(isinstance(r, ia.BudgetUnavailableError) for r in results)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    await budget.close()


@pytest.mark.stress
async def test_budgets_opening_one_new_sqlite_file_at_once_all_open(tmp_path: Path) -> None:
    """Switching a new file to WAL is refused without waiting ("database is locked") to
    the others opening it at the same moment: they try again within the store timeout."""
    for trial in range(20):
        url = f"sqlite:///{tmp_path / f'new-{trial}.db'}"
        budgets = [ia.RateBudget(limit=50, shared=url, key="k") for _ in range(6)]
        try:
            permits = await asyncio.gather(*(spender_of(b).take(max_wait=0) for b in budgets))
        finally:
            for budget in budgets:
                await budget.close()
        assert len(permits) == 6


@pytest.mark.parametrize("ahead", ["wall", "both"])
async def test_a_process_whose_clock_runs_ahead_still_gets_its_share(
    tmp_path: Path, ahead: str
) -> None:
    """Two processes on one SQLite file, the second one's clock 2 s ahead and first used
    a second after the other's, take in turns (in a random order) for 60 s of a budget of
    4 per 4 s: each gets a fair share (the skew guard once made the fast one see every
    unit back late, so it got almost nothing), and no 4 s window holds more than 4."""
    rng = random.Random(5)
    true_time = [1_000_000.0]
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    slow, fast = _stores(url, true_time, ahead)
    budgets = {"slow": ia.RateBudget(4, 4.0, key="acme", store=slow)}
    await budgets["slow"].refresh()
    true_time[0] += 1.0
    budgets["fast"] = ia.RateBudget(4, 4.0, key="acme", store=fast)
    taken: dict[str, list[float]] = {"slow": [], "fast": []}
    for _ in range(240):  # 60 s in steps of 0.25 s
        for name in rng.sample(["slow", "fast"], 2):
            while True:
                try:
                    await spend(budgets[name])
                except ia.RateLimitExceeded:
                    break
                taken[name].append(true_time[0])
        true_time[0] += 0.25
    every = sorted(taken["slow"] + taken["fast"])
    assert max(bisect.bisect_left(every, t + 4.0) - i for i, t in enumerate(every)) <= 4
    assert len(taken["fast"]) >= 0.25 * len(every), (len(taken["fast"]), len(every))
    assert len(taken["slow"]) >= 0.25 * len(every), (len(taken["slow"]), len(every))
    await slow.close()
    await fast.close()
