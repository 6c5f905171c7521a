"""The README's web-backend examples, run as written against the fake service."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from invoicing_async.testing import FakeInvoicingService

README = Path(__file__).parents[1] / "README.md"


def example(name: str) -> dict[str, Any]:
    """Execute the code block after `<!-- example: name -->` and return its names."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", text, re.S)
    assert match, f"README has no {name} example"
    namespace: dict[str, Any] = {"__name__": f"readme_{name}"}
    exec(compile(match.group(1), f"README:{name}", "exec"), namespace)
    return namespace


@pytest.fixture
def account_env(service_in_thread: FakeInvoicingService, monkeypatch: pytest.MonkeyPatch) -> int:
    """The client's settings in the environment, as `from_env()` reads them."""
    monkeypatch.setenv("INVOICING_BASE_URL", service_in_thread.base_url)
    monkeypatch.setenv("INVOICING_USERNAME", service_in_thread.username)
    monkeypatch.setenv("INVOICING_PASSWORD", service_in_thread.password)
    return min(service_in_thread.account.invoices)


async def test_the_fastapi_example(account_env: int) -> None:
    app = example("fastapi")["app"]
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),  # the lifespan: one client for the app
        httpx.AsyncClient(transport=transport, base_url="http://app") as http,
    ):
        found = await http.get(f"/invoices/{account_env}")
        assert found.status_code == 200
        body = found.json()
        assert body["id"] == account_env
        assert isinstance(body["total_price_incl_tax"], str)  # money stays exact
        assert (await http.get("/invoices/999999")).status_code == 404


async def test_the_aiohttp_example(account_env: int) -> None:
    app: web.Application = example("aiohttp")["app"]
    async with TestClient(TestServer(app)) as http:  # runs cleanup_ctx: one client
        found = await http.get(f"/invoices/{account_env}")
        assert found.status == 200
        body = await found.json()
        assert body["id"] == account_env
        assert isinstance(body["total_price_incl_tax"], str)
        assert (await http.get("/invoices/999999")).status == 404
