"""`with_raw_response`: generated over every operation (the cases of test_operations, run
through the raw views), and the views cover exactly the resources' operations."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._models.payloads import dump_model
from invoicing_async._resources.invoices import InvoicesResource
from invoicing_async._resources.recurring_templates import RecurringTemplatesResource
from invoicing_async.testing._writers import dump_sync_entries
from tests.integration.resources.test_operations import API, CASES, INVOICE, Case, docs
from tests.scripted import ScriptedAPI, scripted_client

RATE = {"X-RateLimit-Limit": "350", "X-RateLimit-Remaining": "297", "X-Request-Id": "abc-1"}

# The operations the shared cases do not call: what the sync engine reads with.
EXTRA = [
    Case(
        "sync revisions",
        lambda c: c.invoices.sync_revisions(),
        "GET",
        "/invoices/sync_list_ids.xml",
        200,
        lambda fmt: dump_sync_entries([m.SyncEntry(1, 10)], fmt),  # type: ignore[arg-type]
        None,
        lambda r: dict(r.items()) == {1: 10},
    ),
    Case(
        "fetch batch",
        lambda c: c.invoices.fetch_batch([42]),
        "POST",
        "/invoices/sync_fetch_ids.xml",
        200,
        docs([INVOICE], m.Invoice),
        None,
        lambda r: [d.model() for d in r.documents] == [INVOICE],
    ),
]
ALL = [*CASES, *EXTRA]


class Called:
    """Records which operation names a case reaches through a raw view."""

    def __init__(self, inner: Any, names: set[str]) -> None:
        self._inner = inner
        self._names = names

    def __getattr__(self, name: str) -> Any:
        self._names.add(name)
        return getattr(self._inner, name)


class RawClient:
    """What a case calls, with every operation taken from the raw views."""

    def __init__(self, client: ia.InvoicingClient, called: dict[str, set[str]]) -> None:
        self.invoices = Called(client.invoices.with_raw_response, called["invoices"])
        self.recurring_templates = Called(
            client.recurring_templates.with_raw_response, called["recurring_templates"]
        )
        self._own = Called(client.with_raw_response, called["client"])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._own, name)


async def run_raw(api: ScriptedAPI, fmt: str, case: Case) -> tuple[Any, dict[str, set[str]]]:
    api.reply(
        case.method,
        API + case.path.replace("%2F", "/").replace("%20", " "),
        case.reply_status,
        case.reply(fmt),
        headers=RATE,
    )
    called: dict[str, set[str]] = {"invoices": set(), "recurring_templates": set(), "client": set()}
    async with scripted_client(api, fmt) as client:
        raw = await case.call(RawClient(client, called))  # type: ignore[arg-type]
    return raw, called


@pytest.mark.parametrize("case", ALL, ids=[c.name for c in ALL])
async def test_every_operation_answers_raw(fmt: str, case: Case) -> None:
    api = ScriptedAPI()
    raw, _ = await run_raw(api, fmt, case)
    assert isinstance(raw, ia.APIResponse)
    assert case.check(raw.parse()), raw.parse()
    assert raw.status_code == case.reply_status
    assert raw.method == case.method
    assert raw.url == f"{api.url}{API}{case.path}"
    assert raw.headers["x-request-id"] == "abc-1"  # any header, case-insensitively
    assert (raw.rate_limit, raw.rate_limit_remaining) == (350, 297)
    assert raw.requests == 1
    assert raw.elapsed >= 0.0
    assert len(api.seen) == 1


async def test_the_cases_reach_every_operation() -> None:
    """Each resource's raw view offers its public coroutine methods, and the generated test
    above calls each of them: a new operation gets a raw twin and must get a case."""
    reached: dict[str, set[str]] = {
        "invoices": set(),
        "recurring_templates": set(),
        "client": set(),
    }
    for case in ALL:
        _, called = await run_raw(ScriptedAPI(), "xml", case)
        for key, names in called.items():
            reached[key] |= names
    for key, cls in (
        ("invoices", InvoicesResource),
        ("recurring_templates", RecurringTemplatesResource),
    ):
        methods = {
            name
            for name, member in inspect.getmembers(cls)
            if not name.startswith("_") and inspect.iscoroutinefunction(member)
        }
        assert "get" in methods
        assert "iter" not in methods  # streams list's answer: use with_raw_response.list
        view = getattr(scripted_client(ScriptedAPI()), key).with_raw_response
        assert set(dir(view)) == methods
        assert reached[key] == methods, key
    assert reached["client"] == {"current_session"}


async def test_a_second_request_is_the_one_described() -> None:
    """A create answered without a body reads the invoice again: the raw answer is that
    GET's, and says two calls were made."""
    api = ScriptedAPI()
    api.reply("POST", f"{API}/invoices.xml", 201, b"", {"Location": f"{API}/invoices/42.xml"})
    api.reply("GET", f"{API}/invoices/42.xml", 200, _single(INVOICE), RATE)
    async with scripted_client(api) as client:
        new = m.Invoice(contact_id=7, details=[m.InvoiceDetail(description="W", tax_rate_id=1)])
        raw = await client.invoices.with_raw_response.create(new)
    assert [s.method for s in api.seen] == ["POST", "GET"]
    assert (raw.method, raw.status_code, raw.requests) == ("GET", 200, 2)
    assert raw.parse() == INVOICE


def _single(invoice: m.Invoice) -> bytes:
    return dump_model(invoice, "xml", mode="document")


async def test_errors_raise_as_without_the_view() -> None:
    api = ScriptedAPI()
    api.reply("GET", f"{API}/invoices/7.xml", 404, b"")
    async with scripted_client(api) as client:
        with pytest.raises(ia.NotFoundError):
            await client.invoices.with_raw_response.get(7)


async def test_unknown_names_and_calls_that_send_nothing() -> None:
    async with scripted_client(ScriptedAPI()) as client:
        with pytest.raises(AttributeError, match="iter"):
            client.invoices.with_raw_response.iter  # noqa: B018
        with pytest.raises(ValueError, match="nothing was sent"):
            await client.invoices.with_raw_response.fetch_batch([])


async def test_the_view_leaves_the_client_as_it_was() -> None:
    """The raw view works on a copy: the client's own resources keep their transport."""
    api = ScriptedAPI()
    api.reply("GET", f"{API}/invoices/42.xml", 200, _single(INVOICE), RATE, times=2)
    async with scripted_client(api) as client:
        before = client.invoices._transport  # noqa: SLF001
        await client.invoices.with_raw_response.get(42)
        assert client.invoices._transport is before  # noqa: SLF001
        assert await client.invoices.get(42) == INVOICE
