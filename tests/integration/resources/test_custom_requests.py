"""`client.request`: any path of the API through the client's budget, retries, auth and
errors, with the raw response, in both formats."""

from __future__ import annotations

from decimal import Decimal

import pytest

import invoicing_async as ia
from invoicing_async.testing import FakeInvoicingService
from tests.scripted import ScriptedAPI, scripted_client

API = "/api/v1.0"


async def test_an_area_the_api_does_not_serve_is_a_406_through_the_budget(
    client: ia.InvoicingClient, service: FakeInvoicingService, fmt: str
) -> None:
    before = client.budget.snapshot().remaining
    with pytest.raises(ia.NotAcceptableError) as info:
        await client.request("GET", "/contacts")
    assert info.value.status == 406
    assert info.value.url.endswith(f"/api/v1.0/contacts.{fmt}")
    assert client.requests_sent == 1
    assert client.budget.snapshot().remaining == before - 1
    assert [r.path for r in service.account.requests] == [f"/api/v1.0/contacts.{fmt}"]


async def test_a_served_path_answers_with_its_document_in_the_clients_format(fmt: str) -> None:
    async with (
        FakeInvoicingService(invoices=2, seed=3) as filled,
        filled.client(format=fmt) as client,
    ):
        raw = await client.request("GET", "invoices/1", params={"note": "a b&c"})
        expected = await client.invoices.get(1)
    assert raw.status_code == 200
    assert raw.rate_limit == 350
    assert raw.rate_limit_remaining == 349
    assert raw.requests == 1
    assert raw.url.endswith(f"/invoices/1.{fmt}?note=a%20b%26c")
    document = raw.parse()
    invoice = document["invoice"]
    if fmt == "xml":
        assert raw.content.startswith(b"<?xml")
        assert invoice["total-price-incl-tax"] == expected.total_price_incl_tax  # typed
        assert invoice["sepa-active"] is False
    else:
        assert raw.json() == document
        assert invoice["total_price_incl_tax"] == str(expected.total_price_incl_tax)
        assert invoice["sepa_active"] is False
    assert invoice["id"] == 1
    assert raw.parse() is document  # decoded once


async def test_a_body_is_written_in_the_clients_format(fmt: str) -> None:
    async with (
        FakeInvoicingService(invoices=1, seed=3) as filled,
        filled.client(format=fmt) as client,
    ):
        before = (await client.invoices.get(1)).total_paid or Decimal(0)
        payment = {"payment_date": "2026-12-01", "payment_method": "cash", "price": "1.25"}
        raw = await client.request("POST", "/invoices/1/payments", body={"payment": payment})
        after = await client.invoices.get(1)
    assert raw.status_code == 201
    assert after.total_paid == before + Decimal("1.25")
    sent = filled.account.requests[1]
    assert sent.path == f"/api/v1.0/invoices/1/payments.{fmt}"


async def test_writes_are_not_retried_once_they_may_have_arrived_and_reads_are() -> None:
    api = ScriptedAPI()
    api.reply("POST", API + "/contacts.json", 500, b"{}")
    api.reply("GET", API + "/contacts/3.json", 503, b"{}")
    api.reply("GET", API + "/contacts/3.json", 200, b'{"contact":{"id":3,"credit":1.10}}')
    async with scripted_client(api, "json") as client:
        with pytest.raises(ia.ServerError):
            await client.request("POST", "/contacts", body={"contact": {"firstname": "Ann"}})
        raw = await client.request("get", "/contacts/3")
    assert [s.method for s in api.seen] == ["POST", "GET", "GET"]
    assert api.seen[0].body == b'{"contact":{"firstname":"Ann"}}'
    assert api.seen[0].headers["Content-Type"] == "application/json"
    assert "Authorization" in api.seen[0].headers
    assert raw.requests == 1  # a retried call counts once
    assert raw.parse() == {"contact": {"id": 3, "credit": Decimal("1.10")}}


async def test_bytes_go_as_they_are_and_a_suffix_given_is_kept() -> None:
    api = ScriptedAPI()
    api.reply("PUT", API + "/contacts/3.xml", 200, b"")
    async with scripted_client(api, "xml") as client:
        raw = await client.request("PUT", "/contacts/3.xml", body=b"<contact><x>1</x></contact>")
    assert api.seen[0].body == b"<contact><x>1</x></contact>"
    assert raw.parse() is None
    assert raw.content == b""


async def test_a_body_without_one_root_is_refused_before_sending() -> None:
    api = ScriptedAPI()
    async with scripted_client(api, "json") as client:
        with pytest.raises(ValueError, match="one root"):
            await client.request("POST", "/contacts", body={"a": {}, "b": {}})
        with pytest.raises(ia.ValidationError):
            await client.request("POST", "/contacts", body={"contact": {"n": float("nan")}})
    assert api.seen == []
