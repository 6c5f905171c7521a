"""OAuth 1.0a against the fake: our `OAuth1Auth` end to end, and oauthlib's server side
refusing bad signatures, unknown keys, stale timestamps and replayed nonces (issue 24,
point 6)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from decimal import Decimal

import aiohttp
import pytest
from oauthlib import oauth1

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async.testing import FakeInvoicingService

SESSION = "/api/v1.0/current_session.xml"


@pytest.fixture
async def oauth_service() -> AsyncIterator[FakeInvoicingService]:
    async with FakeInvoicingService(oauth1=True, invoices=3) as service:
        yield service


@pytest.mark.slow
async def test_oauth1_auth_end_to_end(oauth_service: FakeInvoicingService, fmt: str) -> None:
    service = oauth_service
    auth = service.oauth1_auth
    assert (auth.consumer_key, auth.token) != (service.username, service.password)
    async with service.client(format=fmt, auth=auth) as client:
        me = await client.current_session()
        assert len(await client.invoices.list()) == 3
        created = await client.invoices.create(
            m.Invoice(
                contact_id=7,
                details=[m.InvoiceDetail(description="Work", price=Decimal(1), tax_rate_id=1)],
            )
        )
        changed = await client.invoices.update(created, po_number="PO-1")
        await client.invoices.delete(changed)
    assert me.email == f"{service.username}@example.com"
    assert changed.po_number == "PO-1"
    assert service.unauthorized == 0
    assert [r.method for r in service.account.requests] == ["GET", "GET", "POST", "PUT", "DELETE"]


async def test_each_account_has_its_own_token(oauth_service: FakeInvoicingService) -> None:
    service = oauth_service
    other = service.add_account("other")
    async with service.client(other, auth=service.oauth1_auth_for(other)) as client:
        assert (await client.current_session()).email == "other@example.com"
    assert len(other.requests) == 1
    assert service.account.requests == []


@pytest.mark.parametrize(
    "spoil",
    ["consumer_secret", "token_secret", "consumer_key", "token"],
)
async def test_a_bad_signature_or_an_unknown_key_is_a_401(
    oauth_service: FakeInvoicingService, fmt: str, spoil: str
) -> None:
    service = oauth_service
    good = service.oauth1_auth
    fields = {
        "consumer_key": good.consumer_key,
        "consumer_secret": good.consumer_secret,
        "token": good.token,
        "token_secret": good.token_secret,
    }
    fields[spoil] = "f" * 24
    async with service.client(format=fmt, auth=ia.OAuth1Auth(**fields)) as client:
        with pytest.raises(ia.AuthenticationError) as info:
            await client.current_session()
    assert info.value.status == 401
    assert service.unauthorized == 1
    assert service.account.requests == []


async def test_a_replayed_nonce_or_a_stale_timestamp_is_a_401(
    oauth_service: FakeInvoicingService,
) -> None:
    service = oauth_service
    url = service.base_url + SESSION
    signed = service.oauth1_auth.headers_for("GET", url, None, None)
    auth = service.oauth1_auth
    stale = oauth1.Client(
        auth.consumer_key,
        client_secret=auth.consumer_secret,
        resource_owner_key=auth.token,
        resource_owner_secret=auth.token_secret,
        timestamp=str(int(time.time()) - 3600),
    )
    _uri, stale_headers, _body = stale.sign(url)
    connector = aiohttp.TCPConnector(ssl=service.ssl_context or True)
    async with aiohttp.ClientSession(connector=connector) as http:
        statuses = []
        for headers in (signed, signed, stale_headers):
            async with http.get(url, headers=headers) as resp:
                statuses.append(resp.status)
        # A fresh signature of the same request goes through again.
        fresh = service.oauth1_auth.headers_for("GET", url, None, None)
        async with http.get(url, headers=fresh) as resp:
            statuses.append(resp.status)
    assert statuses == [200, 401, 401, 200]
    assert service.unauthorized == 2


async def test_oauth1_is_off_unless_asked_for(service: FakeInvoicingService) -> None:
    with pytest.raises(RuntimeError, match="oauth1=True"):
        _ = service.oauth1_auth
    spare = FakeInvoicingService(oauth1=True)
    async with service.client(auth=spare.oauth1_auth) as client:
        with pytest.raises(ia.AuthenticationError):
            await client.current_session()
