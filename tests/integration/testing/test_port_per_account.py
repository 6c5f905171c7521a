"""`port_per_account`: each account of the fake service on a port of its own, as each real
customer has a host of its own (the jobs layer keys the shared budget by host[:port])."""

from __future__ import annotations

import aiohttp
import pytest

import invoicing_async as ia
from invoicing_async.testing import FakeInvoicingService

SESSION = "/api/v1.0/current_session.xml"


async def status(base_url: str, username: str, password: str) -> int:
    headers = {"Authorization": aiohttp.encode_basic_auth(username, password)}
    async with (
        aiohttp.ClientSession(base_url=base_url, headers=headers) as http,
        http.get(SESSION) as resp,
    ):
        return resp.status


async def test_each_account_answers_on_its_own_port_only() -> None:
    service = FakeInvoicingService(tls=False, port_per_account=True, password="pw", invoices=5)
    one = service.add_account("one", password="pw")
    two = service.add_account("two", password="pw")
    async with service:
        urls = {a.username: service.base_url_for(a) for a in (service.account, one, two)}
        assert urls[service.username] == service.base_url
        assert len(set(urls.values())) == 3  # three ports
        assert await status(urls["one"], "one", "pw") == 200
        assert await status(urls["two"], "two", "pw") == 200
        # Another account's credentials on this port are refused, as on another host.
        assert await status(urls["one"], "two", "pw") == 401
        assert await status(service.base_url, "one", "pw") == 401
        assert service.unauthorized == 2
        async with service.client(service.account, format="json") as client:
            assert len(await client.invoices.list()) == 5
        with pytest.raises(RuntimeError, match="before the service starts"):
            service.add_account("late")
    assert (one.window.used, two.window.used) == (1, 1)


async def test_without_it_every_account_shares_the_base_url() -> None:
    service = FakeInvoicingService(tls=False, password="pw")
    other = service.add_account("other", password="pw")
    async with service:
        assert service.base_url_for(other) == service.base_url
        assert await status(service.base_url, "other", "pw") == 200
        async with service.client(other, budget=ia.RateBudget(limit=10)) as client:
            assert await client.invoices.list() == []
