"""Eight processes sharing one journal, each key used by two of them at once: one effect on
the service per key."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import invoicing_async as ia
from invoicing_async.testing import FakeInvoicingService
from tests.integration.writes.chaos import Child, chaos_faults
from tests.integration.writes.writer_child import Plan
from tests.servers import POSTGRES

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

PAIRS, CREATES, FOLLOWUPS = 4, 30, 10


@pytest.mark.parametrize("store", ["sqlite", POSTGRES])
async def test_two_writers_of_each_key_give_one_effect(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    if store == "postgres":
        journal = str(request.getfixturevalue("postgres_url"))
    else:
        journal = f"sqlite:///{tmp_path / 'writes.sqlite3'}"
    async with FakeInvoicingService(limit=10_000_000) as service:
        account = service.account
        account.faults = chaos_faults(8)
        ca = tmp_path / "ca.pem"
        service.write_ca(ca)
        fmt: ia.Format = "json"
        plans = [
            Plan(
                service.base_url,
                service.username,
                service.password,
                str(ca),
                journal,
                fmt,
                CREATES,
                FOLLOWUPS,
                prefix=f"pair{pair}",
            )
            for pair in range(PAIRS)
            for _ in range(2)
        ]
        children = [Child(plan) for plan in plans]
        codes = await asyncio.gather(*(child.wait() for child in children))
        assert codes == [0] * len(children)
        keys = [f"pair{p}-{i}" for p in range(PAIRS) for i in range(CREATES)]
        assert [account.created_per_marker[k] for k in keys] == [1] * len(keys)
        followed = [
            invoice.id or 0
            for invoice in account.invoices.values()
            if int((invoice.po_number or "-0").rsplit("-", 1)[1]) < FOLLOWUPS
        ]
        assert len(followed) == PAIRS * FOLLOWUPS
        for counter in (
            account.sends_per_invoice,
            account.reminders_per_invoice,
            account.payments_per_invoice,
        ):
            assert [counter[i] for i in followed] == [1] * len(followed)
