"""Fixtures of the fake service's own tests: plain aiohttp against it, no SDK in between."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from invoicing_async.testing import FakeInvoicingService


@pytest.fixture
async def http(service: FakeInvoicingService) -> AsyncIterator[aiohttp.ClientSession]:
    headers = {"Authorization": aiohttp.encode_basic_auth(service.username, service.password)}
    connector = aiohttp.TCPConnector(ssl=service.ssl_context or True)
    async with aiohttp.ClientSession(
        base_url=service.base_url, headers=headers, connector=connector
    ) as session:
        yield session
