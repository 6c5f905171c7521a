"""Three OS processes, 20 callers each, spending one shared budget against a loopback
server that counts what it receives: never a request beyond the limit, no 403, and a
process that restarts mid-hour does not spend the hour again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from invoicing_async.testing import FakeInvoicingService
from tests.stress.budget.budget_child import run_children

pytestmark = pytest.mark.stress  # processes of their own, 20 callers each

ROOT = Path(__file__).parents[3]
LIMIT = 30


async def run_processes(
    service: FakeInvoicingService, shared: str, processes: int, callers: int, most: int | None
) -> list[dict[str, Any]]:
    args = [service.base_url, service.username, service.password, shared, str(LIMIT), "3600"]
    args += [str(callers), "0"] + ([str(most)] if most is not None else [])
    return await run_children(args, processes, cwd=ROOT)


async def test_three_processes_never_spend_more_than_the_limit(shared_budget_url: str) -> None:
    async with FakeInvoicingService(tls=False, limit=LIMIT) as service:
        # One process spends 12 and ends (a restart mid-hour)...
        (first,) = await run_processes(service, shared_budget_url, 1, 1, most=12)
        assert first["ok"] == 12
        # ...then three processes of 20 callers each take what is left, and only that.
        results = await run_processes(service, shared_budget_url, 3, 20, most=None)
        assert sum(r["ok"] for r in results) == LIMIT - 12
        assert all(r["local"] >= 20 for r in results)  # each caller stopped by the budget
        assert sum(r["server"] for r in results) == 0
        assert service.account.window.used == LIMIT
        assert service.account.counters["403"] == 0
