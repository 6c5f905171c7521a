"""`client.invoices`: the thirteen invoice operations of specification part 4.1."""

from __future__ import annotations

import builtins
import datetime as dt
import functools
import json
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from decimal import Decimal
from typing import Any, Literal

import attrs

from invoicing_async._models.documents import (
    MemberError,
    load_list,
    load_model,
    load_one_of,
    load_sync_revisions,
)
from invoicing_async._models.payloads import (
    dump_changes,
    dump_filter,
    dump_model,
    dump_send,
    dump_sync_fetch_ids,
)
from invoicing_async._models.stored import InvoiceDocument, load_invoice_documents
from invoicing_async._resources import validation
from invoicing_async._resources.base import (
    Resource,
    id_from_location,
    id_of,
    segment,
    sets_attributes_only,
)
from invoicing_async._resources.decoding import decode_off_loop, iter_models
from invoicing_async._transport.response import server_time
from invoicing_async._writes.core import (
    Intent,
    check_key,
    create_candidates,
    marker_match,
    on_service_clock,
    payment_applied,
    send_applied,
)
from invoicing_async._writes.once import Answer, KeyedWrite
from invoicing_async.errors import DecodeError, IdempotencyKeyError
from invoicing_async.models import Invoice, InvoicePayment, SyncEntry, SyncRevisions

__all__ = ["SYNC_FETCH_LIMIT", "FetchedBatch", "InvoicesResource"]

SYNC_FETCH_LIMIT = 100
# A reply may hold members nobody asked for (they are ignored), but not without bound.
_REPLY_LIMIT = 2 * SYNC_FETCH_LIMIT


@attrs.frozen
class FetchedBatch:
    """One sync-fetch reply as the sync engine takes it: the invoices as documents, the
    members that could not be read (id when readable, and why), and the server's `Date`."""

    documents: builtins.list[InvoiceDocument]
    server_time: float | None
    unreadable: builtins.list[MemberError] = attrs.field(factory=list)


class InvoicesResource(Resource):
    """Invoices of the account. Every method costs one request unless it says otherwise."""

    #: The invoice attribute that carries a create's idempotency key (the client's
    #: `write_marker`): a text attribute the service keeps.
    _marker = "po_number"

    async def list(self, filter: str | int | None = None) -> builtins.list[Invoice]:
        """All invoices, or those of a named filter or saved-filter id.

        GET /invoices.xml, or GET /invoices/filter/:filter.xml. Filter names are those of
        `InvoiceFilter` (`"open"`, `"this_month"`, …); other names and numeric ids of
        saved filters are passed through.
        """
        response = await self._transport.request("GET", _list_path(filter))
        return await decode_off_loop(load_list, response.body, self._fmt, Invoice)

    async def iter(self, filter: str | int | None = None) -> AsyncIterator[Invoice]:
        """`list()` as an async iterator: ``async for invoice in client.invoices.iter():``; one
        request, invoices decoded a batch at a time in a worker thread."""
        response = await self._transport.request("GET", _list_path(filter))
        async for invoice in iter_models(response.body, self._fmt, Invoice):
            yield invoice

    async def advanced_filter(
        self, parameters: Mapping[str, Any], *, root: str = "filter"
    ) -> builtins.list[Invoice]:
        """Invoices matching filter parameters: POST /invoices/filter/advanced.xml.

        The specification does not list the parameters; `parameters` is sent as given,
        wrapped in `root` (`<filter>…</filter>` or `{"filter": {…}}`).
        """
        path = "/invoices/filter/advanced.xml"
        body = self._write("POST", path, functools.partial(dump_filter, root=root), parameters)
        response = await self._transport.request("POST", path, body=body)
        return await decode_off_loop(load_list, response.body, self._fmt, Invoice)

    async def get(self, invoice: int | Invoice) -> Invoice:
        """One invoice by its numeric id (or read again): GET /invoices/:id.xml.

        Raises `NotFoundError`. Every method that names an invoice takes its id or the
        `Invoice` itself; an invoice without an id raises `ValueError`.
        """
        response = await self._transport.request("GET", self._path(invoice))
        return load_model(response.body, self._fmt, Invoice)

    async def get_by_invoice_id(self, invoice_number: str) -> Invoice:
        """One invoice by its number (`"2014-0096"`): GET /invoices/invoice_id/:invoice_id.xml."""
        response = await self._transport.request(
            "GET", f"/invoices/invoice_id/{segment(invoice_number)}.xml"
        )
        return load_model(response.body, self._fmt, Invoice)

    async def create(self, invoice: Invoice, *, idempotency_key: str | None = None) -> Invoice:
        """Create an invoice (state `draft`): POST /invoices.xml, 201.

        Read-only attributes of `invoice` are not sent. Raises `ValidationError` before
        sending when the invoice has no lines, no contact, or a line without
        description or tax_rate_id (unless the client was made with `validate=False`).
        With `idempotency_key`, the key is sent in the client's marker field (`po_number`
        unless chosen otherwise) and the invoice is created at most once for it (see
        "Writes that happen once" in the client guide).
        """
        self._check(validation.check_invoice(invoice), "POST", "/invoices.xml")
        if idempotency_key is None:
            body = self._write("POST", "/invoices.xml", dump_model, invoice)
            answer = await self._created(body)
        else:
            marker = self._marker_of(invoice, idempotency_key)
            write_marked = functools.partial(dump_model, setting=marker)
            body = self._write("POST", "/invoices.xml", write_marked, invoice)
            write = KeyedWrite("create_invoice", idempotency_key, None, body, self._marker)
            answer = Answer(await self._once(write, functools.partial(self._created, body)))
        return load_model(answer.body, self._fmt, Invoice)

    async def _created(self, body: bytes) -> Answer:
        """The created invoice's document: the answer, or a GET of its `Location`."""
        response = await self._transport.request("POST", "/invoices.xml", body=body)
        location = response.headers.get("Location")
        ident = id_from_location(location) if location else None
        if response.body.strip():
            return Answer(response.body, ident)
        ident = id_from_location(location)
        fetched = await self._transport.request("GET", self._path(ident))
        return Answer(fetched.body, ident)

    def _marker_of(self, invoice: Invoice, key: str) -> dict[str, str]:
        """The marker field set to `key`, for the body of `invoice`; an invoice holding
        another value there is refused (the marker would be lost)."""
        check_key(key)
        held = getattr(invoice, self._marker)
        if held is not None and held != key:
            raise IdempotencyKeyError(
                f"the invoice's {self._marker} ({held!r}) is the marker field that carries the "
                "idempotency key: leave it empty, or make the client with another "
                "write_marker=; nothing was sent"
            )
        return {self._marker: key}

    async def update(self, invoice: int | Invoice, /, **changes: Any) -> Invoice:
        """Change the named attributes only: PUT /invoices/:id.xml.

        Lines go in `details`: an `InvoiceDetail` without id adds a line, with an id
        changes it, with `destroy=True` deletes it. `None` clears an attribute. When the
        service answers without a body, the invoice is fetched (a second request). An
        update that adds or deletes no line is retried after a 5xx, as a GET is; one that
        does is never sent twice once the service may have acted.
        """
        path = self._path(invoice)
        self._check(validation.check_invoice_changes(changes), "PUT", path)
        body = self._write("PUT", path, dump_changes, Invoice, changes)
        idempotent = sets_attributes_only(changes)
        response = await self._transport.request("PUT", path, body=body, idempotent=idempotent)
        return await self._invoice_or_refetch(response.body, invoice)

    async def send_invoice(
        self,
        invoice: int | Invoice,
        *,
        send_method: str,
        email: str | None = None,
        invoice_email: str | None = None,
        idempotency_key: str | None = None,
    ) -> Invoice:
        """Send the invoice (draft -> open): PUT /invoices/:id/send_invoice.xml.

        `send_method` is `email`, `hand` or `post`. Without `email` and `invoice_email`
        the service takes the contact's address and the profile's text. The invoice
        number and date are assigned now when they were not set. With `idempotency_key`,
        sent at most once for the key.
        """
        return await self._send(
            "send_invoice", invoice, email, invoice_email, send_method, idempotency_key
        )

    async def send_reminder(
        self,
        invoice: int | Invoice,
        *,
        send_method: str,
        email: str | None = None,
        invoice_email: str | None = None,
        idempotency_key: str | None = None,
    ) -> Invoice:
        """Send a payment reminder: PUT /invoices/:id/send_reminder.xml (payload as send).
        With `idempotency_key`, sent at most once for the key."""
        return await self._send(
            "send_reminder", invoice, email, invoice_email, send_method, idempotency_key
        )

    async def _send(
        self,
        action: Literal["send_invoice", "send_reminder"],
        invoice: int | Invoice,
        email: str | None,
        invoice_email: str | None,
        send_method: str,
        key: str | None,
    ) -> Invoice:
        path = self._path(invoice, action)
        self._check(validation.check_send(send_method), "PUT", path)
        body = self._write("PUT", path, dump_send, email, invoice_email, send_method)
        if key is None:
            response = await self._transport.request("PUT", path, body=body)
            return await self._invoice_or_refetch(response.body, invoice)
        target = id_of(invoice, Invoice)
        write = KeyedWrite(action, key, target, body, send_method)
        send = functools.partial(self._answered, "PUT", path, body, payment=False)
        answer = await self._once(write, send)
        return load_model(answer, self._fmt, Invoice)

    async def _answered(self, method: str, path: str, body: bytes, *, payment: bool) -> Answer:
        """The invoice a send or payment answers with (decoded when a payment's answer had to
        be told from the payment); read again when the answer is not it."""
        response = await self._transport.request(method, path, body=body)
        if response.body.strip():
            if not payment:
                return Answer(response.body)
            answer = load_one_of(response.body, self._fmt, (Invoice, InvoicePayment))
            if isinstance(answer, Invoice):
                return Answer(response.body, model=answer)
        fetched = await self._transport.request("GET", path.rsplit("/", 1)[0] + ".xml")
        return Answer(fetched.body)

    async def register_payment(
        self,
        invoice: int | Invoice,
        payment: InvoicePayment,
        *,
        idempotency_key: str | None = None,
    ) -> Invoice:
        """Register a payment: POST /invoices/:id/payments.xml, 201. Returns the invoice.

        The service answers with the updated invoice (state, `total_paid`, `payments`).
        When it answers with the payment or without a body instead, the invoice is
        fetched: a second request, only then. With `idempotency_key`, registered at most
        once for the key.
        """
        path = self._path(invoice, "payments")
        self._check(validation.check_payment(payment), "POST", path)
        body = self._write("POST", path, dump_model, payment)
        send = functools.partial(self._answered, "POST", path, body, payment=True)
        if idempotency_key is None:
            answer = await send()
            if isinstance(answer.model, Invoice):
                return answer.model
            return load_model(answer.body, self._fmt, Invoice)
        detail = json.dumps(
            [
                None if payment.price is None else str(payment.price),
                payment.payment_method,
                None if payment.payment_date is None else payment.payment_date.isoformat(),
            ]
        )
        target = id_of(invoice, Invoice)
        write = KeyedWrite("register_payment", idempotency_key, target, body, detail)
        return load_model(await self._once(write, send), self._fmt, Invoice)

    async def _look(self, intent: Intent) -> Answer | None:
        """Whether a keyed write was applied: the sync list and the new ids' documents for a
        create (1 + ceil(new ids / 100) requests), one GET of the invoice otherwise."""
        if intent.kind == "create_invoice":
            return await self._look_created(intent)
        assert intent.target is not None
        response = await self._transport.request("GET", self._path(intent.target))
        at = _intent_on_service(intent, response.headers)
        invoice = load_model(response.body, self._fmt, Invoice)
        if intent.kind == "register_payment":
            price, method, date = json.loads(intent.detail)
            wanted = InvoicePayment(
                price=None if price is None else Decimal(price),
                payment_method=method,
                payment_date=None if date is None else dt.date.fromisoformat(date),
            )
            applied = payment_applied(invoice, wanted, at=at)
        else:
            reminder = intent.kind == "send_reminder"
            applied = send_applied(invoice, reminder=reminder, send_method=intent.detail, at=at)
        return Answer(response.body) if applied else None

    async def _look_created(self, intent: Intent) -> Answer | None:
        response = await self._transport.request("GET", "/invoices/sync_list_ids.xml")
        at = _intent_on_service(intent, response.headers)
        revisions = await decode_off_loop(load_sync_revisions, response.body, self._fmt)
        candidates = create_candidates(revisions, intent.since_id, at)
        for start in range(0, len(candidates), SYNC_FETCH_LIMIT):
            batch = await self.sync_fetch_ids(candidates[start : start + SYNC_FETCH_LIMIT])
            found = marker_match(batch, intent.detail, intent.key)
            if isinstance(found, Invoice):
                return Answer(dump_model(found, self._fmt, mode="document"), found.id)
        return None

    async def delete(self, invoice: int | Invoice) -> None:
        """Delete the invoice: DELETE /invoices/:id.xml. Raises `NotFoundError` if unknown."""
        await self._transport.request("DELETE", self._path(invoice))

    async def sync_list_ids(self) -> builtins.list[SyncEntry]:
        """Id and revision of every invoice: GET /invoices/sync_list_ids.xml."""
        revisions = await self.sync_revisions()
        return [SyncEntry(id=i, revision=r) for i, r in revisions.items()]

    async def sync_revisions(self) -> SyncRevisions:
        """`sync_list_ids` as the sync engine reads it: a compact {id: revision} (the
        highest if an id is listed twice), 16 bytes an invoice, no object per invoice."""
        response = await self._transport.request("GET", "/invoices/sync_list_ids.xml")
        return await decode_off_loop(load_sync_revisions, response.body, self._fmt)

    async def sync_fetch_ids(self, ids: Iterable[int | Invoice]) -> builtins.list[Invoice]:
        """Full invoices for `ids`: POST /invoices/sync_fetch_ids.xml, 100 ids a request.

        Ids are de-duplicated and sent in ceil(unique ids / 100) requests; ids the service does
        not return are absent from the result; an unreadable invoice raises `DecodeError`."""
        unique = list(dict.fromkeys(id_of(i, Invoice) for i in ids))
        invoices: builtins.list[Invoice] = []
        for start in range(0, len(unique), SYNC_FETCH_LIMIT):
            batch = await self.fetch_batch(unique[start : start + SYNC_FETCH_LIMIT])
            if batch.unreadable:
                first = batch.unreadable[0]
                raise DecodeError(f"invoice {first.ident}: {first.error}")
            invoices.extend(document.model() for document in batch.documents)
        return invoices

    async def fetch_batch(
        self, ids: builtins.list[int], *, keep_values: bool = False
    ) -> FetchedBatch:
        """One sync-fetch request for at most 100 ids as the sync engine reads it (`SyncFetch`);
        a reply of more than twice as many members as ids is refused before anything is built.
        `keep_values`: each document keeps its checked values (`InvoiceDocument.values()`)."""
        if len(ids) > SYNC_FETCH_LIMIT:
            raise ValueError(f"at most {SYNC_FETCH_LIMIT} ids per sync-fetch request")
        if not ids:
            return FetchedBatch(documents=[], server_time=None)
        response = await self._transport.request(
            "POST", "/invoices/sync_fetch_ids.xml", body=dump_sync_fetch_ids(ids, self._fmt)
        )
        read = functools.partial(
            load_invoice_documents, limit=_REPLY_LIMIT, keep_values=keep_values
        )
        documents, unreadable = await decode_off_loop(read, response.body, self._fmt)
        return FetchedBatch(
            documents=documents, server_time=server_time(response.headers), unreadable=unreadable
        )

    @staticmethod
    def _path(invoice: int | Invoice, action: str | None = None) -> str:
        """`/invoices/42.xml`, or `/invoices/42/<action>.xml`."""
        base = f"/invoices/{segment(id_of(invoice, Invoice))}"
        return f"{base}/{action}.xml" if action else f"{base}.xml"

    async def _invoice_or_refetch(self, body: bytes, invoice: int | Invoice) -> Invoice:
        if body.strip():
            return load_model(body, self._fmt, Invoice)
        return await self.get(invoice)


def _intent_on_service(intent: Intent, headers: Mapping[str, str]) -> float:
    """The intent's time on the service's clock, from a look's `Date` header."""
    return on_service_clock(intent.at, now=time.time(), server_now=server_time(headers))


def _list_path(filter: str | int | None) -> str:
    return "/invoices.xml" if filter is None else f"/invoices/filter/{segment(filter)}.xml"
