"""SIGKILL at random points of a multi-batch sync, then resume: nothing lost, little repeated."""

from __future__ import annotations

import asyncio
import math
import random
from pathlib import Path
from typing import Any

import pytest

from invoicing_async._sync.plan import plan_sync
from invoicing_async.sync import SyncEngine
from invoicing_async.testing import FakeInvoicingService
from tests import forked
from tests.events import until
from tests.integration.reliability import sync_child
from tests.integration.reliability.sync_child import open_store
from tests.servers import POSTGRES

INVOICES = 1200
#: Kill points: after 0..5 answered requests of the run (0: before any, 5: past a resume's
#: last), each taken three times per backend.
KILL_POINTS = 6
KILLS = 3 * KILL_POINTS


class Child:
    """A sync run in a process forked from the tests' forkserver (tests/forked.py): a fork,
    not a new interpreter importing the package for each of the 38 runs."""

    def __init__(self, service: FakeInvoicingService, ca: Path, db: str) -> None:
        ctx = forked.context()
        self.started_event = ctx.Event()
        args = (service.base_url, service.username, service.password, str(ca), db)
        self.process = ctx.Process(target=sync_child.run, args=(args, self.started_event))
        self.process.start()

    async def started(self) -> bool:
        """Whether the run opened its client and store (False: it never did, a hang)."""
        return await asyncio.to_thread(self.started_event.wait, forked.GUARD)

    @property
    def returncode(self) -> int | None:
        return self.process.exitcode

    def kill(self) -> None:
        self.process.kill()

    async def wait(self) -> int | None:
        await asyncio.to_thread(self.process.join, forked.GUARD)
        return self.process.exitcode


async def child(service: FakeInvoicingService, ca: Path, db: str) -> Child:
    return Child(service, ca, db)


def count(service: FakeInvoicingService, suffix: str, since: int = 0) -> int:
    return sum(1 for r in service.account.requests[since:] if r.path.endswith(suffix))


async def needed(service: FakeInvoicingService, db: str) -> int:
    """Invoices the store still lacks or has in an older revision."""
    async with open_store(db) as store:
        listed = {entry.id: entry.revision for entry in service.account.sync_list()}
        plan = plan_sync(listed, await store.revisions(), {})
    return len(plan.to_fetch)


pytestmark = [pytest.mark.reliability, pytest.mark.stress]  # 18 SIGKILLs per backend


@pytest.mark.parametrize("backend", ["sqlite", POSTGRES])
async def test_sigkill_at_random_points_converges(
    tmp_path: Path, record: list[dict[str, object]], backend: str, request: pytest.FixtureRequest
) -> None:
    rng = random.Random(2014)
    async with FakeInvoicingService(invoices=INVOICES, seed=12, limit=100_000) as service:
        account = service.account
        account.record_bodies = False
        account.faults.latency = 0.03  # a sync takes long enough to be interrupted
        ca = tmp_path / "ca.pem"
        service.write_ca(ca)
        # PostgreSQL: the clean copy is another account of the same database.
        if backend == "postgres":
            db = clean_db = request.getfixturevalue("postgres_url")
        else:
            db, clean_db = str(tmp_path / "crashy.db"), str(tmp_path / "clean.db")
        interrupted = 0
        worst_waste = 0
        for kill in range(KILLS):
            for ident in rng.sample(sorted(account.invoices), 250):
                account.mutate(ident)  # always work to do, and to lose
            # The run reads them after their second is over: no same-second re-reads, so
            # every fetch below is work the store still needed.
            service.clock.advance(seconds=2)
            before = await needed(service, db)
            mark = len(account.requests)
            process = await child(service, ca, db)
            assert await process.started()  # the process is up
            # A point of the run: after its first `answered` requests were answered (0: before
            # any), by the run's own events, not a random delay; every point in turn.
            answered = kill % KILL_POINTS

            def reached(mark: int = mark, answered: int = answered, run: Any = process) -> bool:
                return len(account.requests) - mark >= answered or run.returncode is not None

            await until(reached, f"the run's request {answered} answered, or its end")
            if process.returncode is None:
                process.kill()
                interrupted += 1
            await process.wait()
            # The server finishes (and logs) a request the dead client had in flight.
            await until(
                lambda: account.requests_total == len(account.requests),
                "no request of the dead run in flight",
            )
            after = await needed(service, db)
            # What the killed run spent: one list, the batches it committed, and at most
            # the one batch in flight when it died.
            assert count(service, "sync_list_ids.xml", mark) <= 1
            committed_batches = math.ceil((before - after) / 100)
            fetched = count(service, "sync_fetch_ids.xml", mark)
            assert fetched <= committed_batches + 1
            worst_waste = max(worst_waste, fetched - committed_batches)

        account.faults.latency = 0.0
        final = await child(service, ca, db)
        await final.wait()
        assert final.returncode == 0
        assert await needed(service, db) == 0
        async with (
            service.client(format="json") as client,
            open_store(clean_db, account="clean") as clean,
        ):
            await SyncEngine(client, clean).run()
            async with open_store(db) as crashed:
                assert await crashed.revisions() == await clean.revisions()
                for ident in sorted(account.invoices)[:: INVOICES // 60]:
                    assert await crashed.get(ident) == await clean.get(ident)
                assert await crashed.pending() == {}
    assert interrupted >= KILLS // 2  # most kills landed mid-sync
    record.append(
        {
            "scenario": f"SIGKILL at random points, then resume ({backend})",
            "runs": KILLS + 1,
            "faults": f"{KILLS} kills, {interrupted} mid-sync",
            "invoices": INVOICES,
            "lost": 0,
            "extra": f"at most 1 list + {worst_waste} batch per kill",
        }
    )
