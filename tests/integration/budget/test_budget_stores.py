"""The PostgreSQL and Redis budget stores under load and when their server freezes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import invoicing_async as ia
from invoicing_async._budget.budget import spender_of
from tests.servers import ServerUnavailable, require_server, start_postgres, start_redis

# PostgreSQL and Redis: the suite's, and servers of their own to freeze (SIGSTOP).
pytestmark = pytest.mark.servers

HOUR = 3600.0


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'budget.db'}"


@pytest.mark.stress
@pytest.mark.parametrize("fixture", ["sqlite_url", "postgres_url", "redis_url"])
async def test_a_shared_budget_serves_1000_concurrent_calls_of_one_process(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    """A web backend's burst: every take waits its turn for a connection, none fails
    within the default store timeout (each call costs the same however many are held)."""
    url = str(request.getfixturevalue(fixture))
    budget = ia.RateBudget(2000, HOUR, shared=url, key="acme")
    hooks = spender_of(budget)

    async def call() -> None:
        permit = await hooks.take(max_wait=0)
        await hooks.settle(permit, limit=None, remaining=None)

    try:
        results = await asyncio.gather(*(call() for _ in range(1000)), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        assert failures == []
        assert (await budget.refresh()).used_in_period == 1000
    finally:
        await budget.close()


def _family(pid: int) -> list[int]:
    """`pid` and every process below it (a PostgreSQL server is a tree of processes)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """The server's processes stopped (SIGSTOP) until the block ends."""
    family = _family(pid)
    for each in family:
        with contextlib.suppress(ProcessLookupError):
            os.kill(each, signal.SIGSTOP)
    try:
        yield
    finally:
        for each in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGCONT)


@contextlib.contextmanager
def dedicated(kind: str) -> Iterator[tuple[str, int]]:
    """A server of its own for this test (it is frozen): its URL and process id."""
    try:
        if kind == "postgres":
            with start_postgres(max_connections=20) as pg:
                yield pg.url(), pg.process.pid
        else:
            with start_redis() as rs:
                yield rs.url(0), rs.process.pid
    except ServerUnavailable as exc:
        require_server(str(exc))


@pytest.mark.parametrize("kind", ["postgres", "redis"])
async def test_a_frozen_store_fails_closed_within_its_timeout(kind: str) -> None:
    """SIGSTOP on the server mid-run: takes fail closed in store_timeout plus a margin,
    however long the client library would wait to cancel its query."""
    with dedicated(kind) as (url, pid):
        budget = ia.RateBudget(100, HOUR, shared=url, key="acme", store_timeout=2.0)
        hooks = spender_of(budget)
        await hooks.settle(await hooks.take(max_wait=0), limit=None, remaining=None)
        with frozen(pid):
            # The budget's own timeout fired (the message names it), whatever the client
            # library would have waited; and so for every taker at once.
            with pytest.raises(ia.BudgetUnavailableError, match="did not answer within 2s"):
                await hooks.take(max_wait=None)
            results = await asyncio.gather(
                *(hooks.take(max_wait=None) for _ in range(5)), return_exceptions=True
            )
            assert all(isinstance(r, ia.BudgetUnavailableError) for r in results), results
            assert all("did not answer within 2s" in str(r) for r in results), results
        await hooks.settle(await hooks.take(max_wait=0), limit=None, remaining=None)
        with contextlib.suppress(ia.BudgetUnavailableError):
            await budget.close()
