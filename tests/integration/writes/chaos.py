"""The chaos run of keyed writes: a writing process under faults, SIGKILLed at random points
and restarted, until its plan is done; then every key is counted on the service. Used by
the stress test (small) and `benchmarks/bench_writes.py` (the issue's full size)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import invoicing_async as ia
from invoicing_async.testing import FakeInvoicingService, FaultPlan
from tests import forked
from tests.events import until
from tests.integration.writes import writer_child
from tests.integration.writes.writer_child import Plan

WRITE_PATHS = ("/invoices.xml", "send_", "payments")


def chaos_faults(seed: int) -> FaultPlan:
    """10% applied then dropped, 5% dropped before applying, 5% applied then 500."""
    return FaultPlan(
        applied_drop_rate=0.10,
        drop_rate=0.05,
        applied_error_rate=0.05,
        only_paths=WRITE_PATHS,
        seed=seed,
    )


class Child:
    def __init__(self, plan: Plan) -> None:
        ctx = forked.context()
        self.started_event = ctx.Event()
        self.process = ctx.Process(target=writer_child.run, args=(plan, self.started_event))
        self.process.start()

    async def started(self) -> bool:
        return await asyncio.to_thread(self.started_event.wait, forked.GUARD)

    async def wait(self) -> int | None:
        await asyncio.to_thread(self.process.join, forked.GUARD)
        return self.process.exitcode


def applied(service: FakeInvoicingService) -> int:
    a = service.account
    return (
        sum(a.created_per_marker.values())
        + sum(a.sends_per_invoice.values())
        + sum(a.reminders_per_invoice.values())
        + sum(a.payments_per_invoice.values())
    )


async def chaos_run(
    tmp_path: Path,
    journal: str,
    fmt: ia.Format,
    *,
    creates: int,
    followups: int,
    kills: int,
    seed: int = 44,
) -> dict[str, Any]:
    """One chaos run; its row: writes, faults, kills, duplicates, losses, extra requests."""
    rng = random.Random(seed)
    async with FakeInvoicingService(limit=10_000_000) as service:
        account = service.account
        account.record_bodies = False
        account.faults = chaos_faults(seed)
        ca = tmp_path / "ca.pem"
        service.write_ca(ca)
        plan = Plan(
            service.base_url,
            service.username,
            service.password,
            str(ca),
            journal,
            fmt,
            creates,
            followups,
        )
        total = creates + 3 * followups
        points = sorted(rng.sample(range(1, total), kills))
        landed = 0
        for point in points:
            child = Child(plan)
            assert await child.started()

            def reached(point: int = point, run: Child = child) -> bool:
                return applied(service) >= point or run.process.exitcode is not None

            await until(reached, f"{point} writes applied", guard=600)
            if child.process.exitcode is None:
                child.process.kill()
                landed += 1
            await child.wait()
            await until(lambda: account.in_flight == 0, "the dead writer's requests handled")
        final = Child(plan)
        assert await final.wait() == 0
        markers = account.created_per_marker
        keys = [f"order-{i}" for i in range(creates)]
        by_key = {i.po_number: i.id for i in account.invoices.values()}
        followed = [by_key.get(k) for k in keys[:followups]]
        duplicates = {
            "invoices": sum(max(0, markers[k] - 1) for k in keys),
            "emails": sum(
                max(0, account.sends_per_invoice[i or 0] - 1)
                + max(0, account.reminders_per_invoice[i or 0] - 1)
                for i in followed
            ),
            "payments": sum(max(0, account.payments_per_invoice[i or 0] - 1) for i in followed),
        }
        losses = (
            sum(1 for k in keys if markers[k] == 0)
            + sum(1 for i in followed if account.sends_per_invoice[i or 0] == 0)
            + sum(1 for i in followed if account.reminders_per_invoice[i or 0] == 0)
            + sum(1 for i in followed if account.payments_per_invoice[i or 0] == 0)
        )
        c = account.counters
        lost_creates = c["answer lost: create"]
        lost_others = (
            c["answer lost: send"] + c["answer lost: reminder"] + c["answer lost: payment"]
        )
        return {
            "store": journal.split(":", 1)[0],
            "format": fmt,
            "writes": f"{creates} creates, {followups} sends/reminders/payments each",
            "faults": f"{lost_creates + lost_others} answers lost "
            f"({c['applied, dropped']} applied+dropped, {c['dropped']} dropped, "
            f"{c['applied, 500']} applied+500)",
            "kills": f"{kills} ({landed} mid-plan)",
            "duplicates": duplicates,
            "losses": losses,
            "per ambiguous create": round(
                (c["sync_list"] + c["sync_fetch"]) / max(1, lost_creates), 2
            ),
            "per ambiguous send/reminder/payment": round(c["get_invoice"] / max(1, lost_others), 2),
        }
