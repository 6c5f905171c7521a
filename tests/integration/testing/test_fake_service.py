"""The fake service's rules, checked with plain aiohttp requests (not through our client,
so that the two cannot share a misunderstanding)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from decimal import Decimal

import aiohttp
import pytest
from aiohttp import web

from invoicing_async.testing import FakeClock, FakeInvoicingService, populate

XML = {"Accept": "application/xml", "Content-Type": "application/xml"}
JSON = {"Accept": "application/json", "Content-Type": "application/json"}
INVOICE_XML = (
    b'<invoice><contact-id type="integer">7</contact-id><details-attributes type="array">'
    b"<detail><description>Work</description><price>60.50</price>"
    b'<tax-rate-id type="integer">1</tax-rate-id></detail></details-attributes></invoice>'
)


async def create(http: aiohttp.ClientSession) -> dict[str, object]:
    async with http.post(
        "/api/v1.0/invoices.xml",
        data=json.dumps(
            {
                "invoice": {
                    "contact_id": 7,
                    "details_attributes": [
                        {"description": "Work", "price": "50.00", "tax_rate_id": 1, "amount": "1 x"}
                    ],
                }
            }
        ),
        headers=JSON,
    ) as resp:
        assert resp.status == 201
        return dict((await resp.json())["invoice"])


async def test_create_xml_gives_201_location_and_a_rails_document(
    http: aiohttp.ClientSession,
) -> None:
    async with http.post("/api/v1.0/invoices.xml", data=INVOICE_XML, headers=XML) as resp:
        assert resp.status == 201
        assert re.fullmatch(
            r"https://127\.0\.0\.1:\d+/api/v1\.0/invoices/1\.xml", resp.headers["Location"]
        )
        assert resp.headers["X-RateLimit-Limit"] == "350"
        assert resp.headers["X-RateLimit-Remaining"] == "349"
        text = await resp.text()
    assert '<id type="integer">1</id>' in text
    assert "<state>draft</state>" in text
    assert '<invoice-id nil="true"/>' in text
    assert '<total-price-incl-tax type="decimal">73.21</total-price-incl-tax>' in text
    assert '<details type="array"><detail>' in text  # one line, still an array
    assert '<payments type="array"/>' in text


async def test_json_is_underscored_and_root_wrapped(http: aiohttp.ClientSession) -> None:
    invoice = await create(http)
    assert invoice["state"] == "draft"
    assert invoice["total_price_incl_tax"] == "60.50"
    async with http.get("/api/v1.0/invoices.xml", headers=JSON) as resp:
        listing = await resp.json()
    assert list(listing[0]) == ["invoice"]


@pytest.mark.parametrize(
    ("body", "attributes"),
    [
        (b'<invoice><contact-id type="integer">7</contact-id></invoice>', {"details"}),
        (
            b'<invoice><details-attributes type="array"><detail><description>x</description>'
            b'<tax-rate-id type="integer">1</tax-rate-id></detail></details-attributes></invoice>',
            {"contact_id"},
        ),
        (
            b'<invoice><contact-id type="integer">7</contact-id><details-attributes type="array">'
            b"<detail><price>1</price></detail></details-attributes></invoice>",
            {"details.description", "details.tax_rate_id"},
        ),
        # Without type="array" Rails reads no list: no lines.
        (
            b'<invoice><contact-id type="integer">7</contact-id><details-attributes>'
            b"<detail><description>x</description><tax-rate-id>1</tax-rate-id></detail>"
            b"</details-attributes></invoice>",
            {"details"},
        ),
    ],
)
async def test_invoice_rules_give_422_with_an_errors_document(
    http: aiohttp.ClientSession, body: bytes, attributes: set[str]
) -> None:
    async with http.post("/api/v1.0/invoices.xml", data=body, headers=XML) as resp:
        assert resp.status == 422
        text = await resp.text()
    found = set(re.findall(r"<attribute>([^<]+)</attribute>", text))
    assert attributes <= found
    assert "<errors><error>" in text


async def test_template_rules(http: aiohttp.ClientSession, service: FakeInvoicingService) -> None:
    past = (service.clock.today() - dt.timedelta(days=1)).isoformat()
    body = {
        "recurring_template": {
            "contact_id": 1,
            "frequency": 1,
            "frequency_type": 7,
            "start_date": past,
            "details_attributes": [],
        }
    }
    async with http.post(
        "/api/v1.0/recurring_templates.xml", data=json.dumps(body), headers=JSON
    ) as resp:
        assert resp.status == 422
        errors = {attribute for attribute, _message in await resp.json()}
    assert errors == {"frequency_type", "details", "start_date"}


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/api/v1.0/invoices/999.xml", 404),
        ("GET", "/api/v1.0/nothing.xml", 404),
        ("GET", "/elsewhere", 404),
        ("PATCH", "/api/v1.0/invoices/1.xml", 501),
        ("POST", "/api/v1.0/current_session.xml", 501),
        ("PUT", "/api/v1.0/invoices/1/archive.xml", 406),
        ("GET", "/api/v1.0/contacts.xml", 406),
    ],
)
async def test_missing_and_unoffered(
    http: aiohttp.ClientSession, method: str, path: str, status: int
) -> None:
    async with http.request(method, path, headers=XML) as resp:
        assert resp.status == status


async def test_401_without_or_with_wrong_credentials(service: FakeInvoicingService) -> None:
    connector = aiohttp.TCPConnector(ssl=service.ssl_context or True)
    async with aiohttp.ClientSession(base_url=service.base_url, connector=connector) as plain:
        async with plain.get("/api/v1.0/current_session.xml") as resp:
            assert resp.status == 401
        bad = {"Authorization": aiohttp.encode_basic_auth(service.username, "nope")}
        async with plain.get("/api/v1.0/current_session.xml", headers=bad) as resp:
            assert resp.status == 401
    assert service.account.window.used == 0


async def test_send_assigns_number_and_date_and_revision_only_grows(
    http: aiohttp.ClientSession, service: FakeInvoicingService
) -> None:
    service.clock.set(dt.datetime(2014, 7, 30, 12, tzinfo=dt.timezone.utc))
    revisions = []
    for _ in range(2):
        invoice = await create(http)
        revisions.append(invoice["revision"])
    send = {"invoice": {"email": "a@example.com", "invoice_email": "Hi", "send_method": "hand"}}
    async with http.put(
        "/api/v1.0/invoices/2/send_invoice.xml", data=json.dumps(send), headers=JSON
    ) as resp:
        sent = (await resp.json())["invoice"]
    assert sent["invoice_id"] == "2014-0001"
    assert sent["invoice_date"] == "2014-07-30"
    assert sent["state"] == "open"
    assert sent["concept_id"] is None
    assert [h["action"] for h in sent["history"]] == [
        "invoice_created",
        "invoice_sent_hand",
    ]
    # Several updates within the same second still give distinct, growing revisions.
    seen = [sent["revision"]]
    for n in range(3):
        body = {"invoice": {"po_number": f"PO-{n}"}}
        async with http.put(
            "/api/v1.0/invoices/2.xml", data=json.dumps(body), headers=JSON
        ) as resp:
            seen.append((await resp.json())["invoice"]["revision"])
    assert seen == sorted(set(seen))


async def test_open_becomes_late_after_due_date_and_paid_when_covered(
    http: aiohttp.ClientSession, service: FakeInvoicingService
) -> None:
    invoice = await create(http)
    send = {"invoice": {"email": "a@example.com", "invoice_email": "Hi", "send_method": "email"}}
    async with http.put(
        f"/api/v1.0/invoices/{invoice['id']}/send_invoice.xml", data=json.dumps(send), headers=JSON
    ):
        pass
    service.clock.advance(days=15)  # default due-date interval: 14 days
    async with http.get(f"/api/v1.0/invoices/{invoice['id']}.xml", headers=JSON) as resp:
        late = (await resp.json())["invoice"]
    assert late["state"] == "late"
    assert late["revision"] > invoice["revision"]
    pay = {"payment": {"payment_method": "ideal", "price": "60.50", "payment_date": "2014-08-01"}}
    async with http.post(
        f"/api/v1.0/invoices/{invoice['id']}/payments.xml", data=json.dumps(pay), headers=JSON
    ) as resp:
        assert resp.status == 201
    async with http.get(f"/api/v1.0/invoices/{invoice['id']}.xml", headers=JSON) as resp:
        paid = (await resp.json())["invoice"]
    assert paid["state"] == "paid"
    assert paid["total_unpaid"] == "0.00"
    assert paid["history"][-1]["action"] == "invoice_paid"


async def test_sync_list_and_fetch(
    http: aiohttp.ClientSession, service: FakeInvoicingService
) -> None:
    populate(service.account, 150, seed=1)
    async with http.get("/api/v1.0/invoices/sync_list_ids.xml", headers=XML) as resp:
        text = await resp.text()
    assert text.count("<invoice>") == 150
    assert '<invoices type="array">' in text
    ids = "".join(f"<id>{i}</id>" for i in range(1, 151))
    body = f"<invoices><ids>{ids}</ids></invoices>".encode()
    async with http.post("/api/v1.0/invoices/sync_fetch_ids.xml", data=body, headers=XML) as resp:
        fetched = await resp.text()
    assert fetched.count("<invoice>") == 100  # at most 100; extra ids ignored, no error
    two_ids = b"<invoices><ids><id>1</id></ids><ids><id>2</id></ids></invoices>"
    async with http.post(
        "/api/v1.0/invoices/sync_fetch_ids.xml", data=two_ids, headers=XML
    ) as resp:
        assert resp.status == 422
    async with http.delete("/api/v1.0/invoices/1.xml"):
        pass
    async with http.get("/api/v1.0/invoices/sync_list_ids.xml", headers=JSON) as resp:
        listed = [e["invoice"]["id"] for e in await resp.json()]
    assert 1 not in listed
    assert len(listed) == 149


@pytest.mark.parametrize("rule", ["fixed", "sliding"])
async def test_hourly_limit_per_account(rule: str) -> None:
    clock = FakeClock()
    async with FakeInvoicingService(limit=3, window_rule=rule, clock=clock) as service:  # type: ignore[arg-type]
        other = service.add_account("other", password="pw")
        connector = aiohttp.TCPConnector(ssl=service.ssl_context or True)
        async with aiohttp.ClientSession(base_url=service.base_url, connector=connector) as http:
            mine = {"Authorization": aiohttp.encode_basic_auth(service.username, service.password)}
            theirs = {"Authorization": aiohttp.encode_basic_auth("other", "pw")}
            statuses = []
            for _ in range(4):
                async with http.get("/api/v1.0/current_session.xml", headers=mine) as resp:
                    statuses.append((resp.status, resp.headers["X-RateLimit-Remaining"]))
                clock.advance(600)
            assert statuses == [(200, "2"), (200, "1"), (200, "0"), (403, "0")]
            async with http.get("/api/v1.0/current_session.xml", headers=theirs) as resp:
                assert resp.status == 200  # its own budget
            clock.advance(1900)  # 4300 s after the first request
            async with http.get("/api/v1.0/current_session.xml", headers=mine) as resp:
                # fixed: the window reset at 3600 s; sliding: the first request left it
                assert resp.status == 200
        assert other.window.used == 1


async def test_push_notification_on_state_change(service: FakeInvoicingService) -> None:
    received: list[dict[str, str]] = []

    async def receiver(request: web.Request) -> web.Response:
        assert request.content_type == "application/x-www-form-urlencoded"
        received.append(dict(await request.post()))  # type: ignore[arg-type]
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/push", receiver)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    service.account.push_url = f"http://127.0.0.1:{port}/push"
    try:
        headers = {"Authorization": aiohttp.encode_basic_auth(service.username, service.password)}
        async with aiohttp.ClientSession(
            base_url=service.base_url,
            headers=headers,
            connector=aiohttp.TCPConnector(ssl=service.ssl_context or True),
        ) as http:
            invoice = await create(http)
            send = {
                "invoice": {"email": "a@example.com", "invoice_email": "Hi", "send_method": "post"}
            }
            async with http.put(
                f"/api/v1.0/invoices/{invoice['id']}/send_invoice.xml",
                data=json.dumps(send),
                headers=JSON,
            ):
                pass
        await service.wait_pushes()
    finally:
        await runner.cleanup()
    assert received == [{"invoice_id": str(invoice["id"]), "state": "open"}]


async def test_plain_http_listener_redirects_to_https(service: FakeInvoicingService) -> None:
    assert service.http_url is not None
    async with (
        aiohttp.ClientSession() as http,
        http.get(service.http_url + "/api/v1.0/invoices.xml?x=1", allow_redirects=False) as resp,
    ):
        assert resp.status == 302
        assert resp.headers["Location"] == service.base_url + "/api/v1.0/invoices.xml?x=1"


async def test_request_log_and_counters(
    http: aiohttp.ClientSession, service: FakeInvoicingService
) -> None:
    await create(http)
    (logged,) = service.account.requests
    assert (logged.method, logged.path, logged.status) == ("POST", "/api/v1.0/invoices.xml", 201)
    assert "Authorization" not in logged.headers
    assert "authorization" not in logged.headers
    assert b"details_attributes" in logged.body
    assert service.account.counters["create_invoice"] == 1


async def test_generator_is_reproducible(service: FakeInvoicingService) -> None:
    a = FakeInvoicingService(invoices=20, seed=5, clock=service.clock)
    b = FakeInvoicingService(invoices=20, seed=5, clock=service.clock)
    assert a.account.invoices == b.account.invoices
    states = {i.state for i in a.account.invoices.values()}
    assert states <= {"draft", "open", "late", "paid"}
    assert len(states) >= 2
    assert all(len(i.details) == 5 for i in a.account.invoices.values())


async def test_faults_are_injected(
    service: FakeInvoicingService, http: aiohttp.ClientSession
) -> None:
    service.account.faults.error_rate = 1.0
    async with http.get("/api/v1.0/current_session.xml", headers=XML) as resp:
        assert resp.status == 500
    service.account.faults.error_rate = 0.0
    service.account.faults.truncate_rate = 1.0
    with pytest.raises(aiohttp.ClientPayloadError):
        async with http.get("/api/v1.0/current_session.xml", headers=XML) as resp:
            await resp.read()
    service.account.faults.truncate_rate = 0.0
    service.account.faults.drop_rate = 1.0
    with pytest.raises(aiohttp.ServerDisconnectedError):
        async with http.get("/api/v1.0/current_session.xml", headers=XML) as resp:
            await resp.read()
    await asyncio.sleep(0)


def test_templates_generate_invoices_on_schedule() -> None:
    from invoicing_async import models as m

    service = FakeInvoicingService()
    template = service.account.create_template(
        m.RecurringTemplate(
            contact_id=1,
            frequency=1,
            frequency_type=2,
            occurences=2,
            details=[
                m.RecurringTemplateDetail(description="Hosting", tax_rate_id=1, price=Decimal("10"))
            ],
        )
    )
    service.clock.advance(days=70)  # tomorrow, then monthly: two runs, then the limit
    made = service.account.run_templates()
    assert len(made) == 2
    assert {i.recurring_template_id for i in made} == {template.id}
    assert all(i.total_price_incl_tax == Decimal("12.10") for i in made)
    assert template.active is False
    assert template.number_of_occurences == 2


async def test_a_price_past_28_digits_to_the_cent_is_totalled_exactly() -> None:
    from invoicing_async import models as m

    async with FakeInvoicingService() as service, service.client(format="json") as client:
        invoice = await client.invoices.create(
            m.Invoice(
                contact_id=1,
                details=[
                    m.InvoiceDetail(
                        description="Shipyard",
                        amount="3",
                        price=Decimal("1000000000000000000000000000000.01"),
                        tax_rate_id=1,
                    )
                ],
            )
        )
    # 21% tax: 630000000000000000000000000000.0063, to the cent .01
    assert invoice.total_price_excl_tax == Decimal("3000000000000000000000000000000.03")
    assert invoice.total_price_incl_tax == Decimal("3630000000000000000000000000000.04")
