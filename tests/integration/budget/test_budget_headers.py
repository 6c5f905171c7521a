"""Rate headers no store can hold are unknown, on every budget store."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import invoicing_async as ia
from invoicing_async.testing import MockSender, mock_response
from tests.servers import POSTGRES, REDIS

HOUR = 3600.0


def _shared(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    if kind == "memory":
        return None
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'budget.db'}"
    return str(request.getfixturevalue(f"{kind}_url"))


@pytest.mark.parametrize("kind", ["memory", "sqlite", POSTGRES, REDIS])
@pytest.mark.parametrize("remaining", [str(2**31), str(2**63), str(10**40)])
async def test_a_remaining_larger_than_any_store_holds_is_unknown(
    kind: str,
    remaining: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Beyond PostgreSQL's int (2^31) or SQLite's (2^63) a settle once failed on every
    request, so each unit came back only a period on: now it is read as `abc` is."""
    sender = MockSender(
        lambda _request: mock_response(
            200,
            "<user><id type='integer'>1</id></user>",
            {"X-RateLimit-Limit": remaining, "X-RateLimit-Remaining": remaining},
        )
    )
    budget = ia.RateBudget(10, HOUR, shared=_shared(kind, request, tmp_path), key="acme")
    caplog.set_level(logging.WARNING, logger="invoicing_async")
    try:
        async with ia.InvoicingClient(
            "https://example.com", auth=ia.BasicAuth("u", "p"), budget=budget, sender=sender
        ) as client:
            for _ in range(3):
                await client.current_session()
        snapshot = await budget.refresh()
        assert snapshot.server_remaining is None
        assert snapshot.used_in_period == 3
        assert [r.getMessage() for r in caplog.records] == []
    finally:
        await budget.close()
