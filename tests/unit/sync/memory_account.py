"""An account in memory, served by the scripted API (tests/scripted.py): the sync's two
requests answered in JSON from a dict of invoices, each reply dated by the account's clock,
faults scripted per request. The engine drives a real client (`account.client()`) through
`MockSender`: requests, decoding and error mapping run for real, without sockets.
"""

from __future__ import annotations

import email.utils
import json
from collections.abc import Callable
from typing import Any

import attrs

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async.testing import SendError
from tests.scripted import Reply, ScriptedAPI, Seen, scripted_client

LIST_PATH = "/api/v1.0/invoices/sync_list_ids.xml"
FETCH_PATH = "/api/v1.0/invoices/sync_fetch_ids.xml"
SPENT = b"Rate limit exceeded"

# A fetch that fails: a status to answer with, or a connection that breaks (`SendError`).
Failure = int | SendError


def connection_reset() -> SendError:
    """The failure of a connection reset before any answer."""
    return SendError(ia.APIConnectionError("connection reset (scripted)"), connected=False)


class MemoryAccount:
    """Invoices by id, a clock, a request counter and scripted faults."""

    def __init__(self, invoices: int = 0, *, now: float = 1_400_000_000.0) -> None:
        self.now = now
        self.data: dict[int, m.Invoice] = {}
        self.requests_sent = 0
        self.allowance: int | None = None  # requests answered before the budget is spent
        self.fetch_sizes: list[int] = []
        self.missing: set[int] = set()
        self.unreadable: dict[int, dict[str, Any]] = {}  # id -> fields the client cannot read
        self.fail_fetches: list[Failure] = []
        self.reply: Callable[[list[int], list[m.Invoice]], list[m.Invoice]] | None = None
        self.api = ScriptedAPI()
        self.api.route("GET", LIST_PATH, self._list)
        self.api.route("POST", FETCH_PATH, self._fetch)
        for ident in range(1, invoices + 1):
            self.change(ident)

    def client(self) -> ia.InvoicingClient:
        """A client of this account, as a new process has: a budget of its own (the
        service's 350 an hour), and no retries (a failed request reaches the engine)."""
        return scripted_client(
            self.api, "json", budget=ia.RateBudget(limit=350), retry=ia.RetryPolicy.none()
        )

    def change(self, ident: int, *, po: str | None = None) -> None:
        """Create or change an invoice now: its revision is the current second."""
        self.data[ident] = m.Invoice(
            id=ident, revision=int(self.now), po_number=po or f"{ident}@{self.now}", state="open"
        )

    def tick(self, seconds: float = 1.0) -> None:
        self.now += seconds

    def spend(self) -> bool:
        """Count a request; False when the budget is spent (the service answers 403)."""
        if self.allowance is not None:
            if self.allowance <= 0:
                return False
            self.allowance -= 1
        self.requests_sent += 1
        return True

    def _dated(self, status: int, body: object) -> Reply:
        headers = {"Date": email.utils.formatdate(self.now, usegmt=True)}
        if status == 403:
            headers["X-RateLimit-Remaining"] = "0"
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return status, raw, headers

    def _list(self, _seen: Seen) -> Reply:
        if not self.spend():
            return self._dated(403, SPENT)
        entries = [{"invoice": {"id": i, "revision": inv.revision}} for i, inv in self.data.items()]
        return self._dated(200, entries)

    def _fetch(self, seen: Seen) -> Reply:
        if not self.spend():
            return self._dated(403, SPENT)
        ids: list[int] = json.loads(seen.body)["invoices"]["ids"]
        assert len(ids) <= 100
        self.fetch_sizes.append(len(ids))
        if self.fail_fetches:
            failure = self.fail_fetches.pop(0)
            if isinstance(failure, SendError):
                raise failure
            return self._dated(failure, b"scripted failure")
        invoices = [self.data[i] for i in ids if i in self.data and i not in self.missing]
        if self.reply is not None:
            invoices = self.reply(ids, invoices)
        return self._dated(200, [{"invoice": self._member(inv)} for inv in invoices])

    def _member(self, invoice: m.Invoice) -> dict[str, Any]:
        """The invoice as the service writes it, with this account's unreadable fields."""
        fields = attrs.asdict(invoice)
        extra = fields.pop("extra")  # members the models do not know, written as they came
        member = {k: v for k, v in fields.items() if v is not None and v != []}
        return {**member, **extra, **self.unreadable.get(invoice.id or 0, {})}
