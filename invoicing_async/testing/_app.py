"""The fake service's HTTP side: request bodies, routing, auth, the hourly limit, faults,
documents."""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.utils
import re
import secrets
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import attrs
from aiohttp import web

from invoicing_async._models.converter import structure
from invoicing_async._models.fields import FieldSpec, field_specs, snake_name, wire_key
from invoicing_async._models.payloads import Format, dump_model, unwrap_root
from invoicing_async._wire.json import decode_json
from invoicing_async._wire.xml import decode_xml
from invoicing_async.errors import DecodeError, FieldError
from invoicing_async.models import Invoice, InvoicePayment, Model, RecurringTemplate
from invoicing_async.testing._account import Account, RecordedRequest
from invoicing_async.testing._documents import sync_chunks
from invoicing_async.testing._oauth import OAuth1Verifier
from invoicing_async.testing._rules import Missing, Unprocessable
from invoicing_async.testing._writers import dump_field_errors, dump_list

__all__ = ["build_app"]

API_PREFIX = "/api/v1.0"
_OTHER_AREAS = (
    "contacts",
    "estimates",
    "incoming_invoices",
    "invoice_profiles",
    "products",
    "tax_rates",
)

# Lists longer than these are streamed: sent piece by piece as they are encoded.
STREAM_INVOICES = 200
STREAM_SYNC_ENTRIES = 10_000


# -- request bodies read as Rails did: `-` and `_` alike, only `type="array"` is a list,
# unknown and read-only attributes ignored (strong parameters)

M = TypeVar("M", bound=Model)


def parse_body(body: bytes, fmt: Format, root: str) -> dict[str, Any]:
    """The attributes under `root` (`<invoice>` / `{"invoice": …}`), their names in
    snake_case; 422 when absent."""
    try:
        name, value = decode_xml(body) if fmt == "xml" else unwrap_root(decode_json(body))
    except DecodeError as exc:
        raise Unprocessable([FieldError(None, f"unreadable body: {exc}")]) from None
    if name is None or snake_name(name) != root or not isinstance(value, dict):
        raise Unprocessable([FieldError(root, f"expected a {root!r} element, got {name!r}")])
    return {snake_name(key): item for key, item in value.items()}


def parse_changes(raw: dict[str, Any], cls: type[Model]) -> dict[str, Any]:
    """Writable attributes present in `raw`, typed, by attribute name (collections as lists
    of such dicts)."""
    lookup: dict[str, FieldSpec] = {}
    for spec in field_specs(cls):
        for key in {spec.name, spec.wire, spec.request}:
            lookup[key] = spec
            lookup[wire_key(key, "xml")] = spec
    out: dict[str, Any] = {}
    for key, value in raw.items():
        found = lookup.get(key)
        if found is None or found.read_only:
            continue  # unknown or read-only: ignored, as Rails' strong parameters do
        spec = found
        if spec.item_model is not None:
            if value is None or value == "":
                out[spec.name] = []
                continue
            if not isinstance(value, list):
                raise Unprocessable([FieldError(spec.name, 'must be a list (type="array")')])
            out[spec.name] = [
                parse_changes(_as_dict(item, spec.name), spec.item_model) for item in value
            ]
            continue
        try:
            out[spec.name] = (
                None if value is None else getattr(structure({key: value}, cls), spec.name)
            )
        except DecodeError as exc:
            raise Unprocessable([FieldError(spec.name, str(exc))]) from None
    return out


def _as_dict(item: Any, name: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise Unprocessable([FieldError(name, "each member must be an element with attributes")])
    return item


def parse_model(raw: dict[str, Any], cls: type[M]) -> M:
    """A new entity from a create body; read-only and unknown attributes are dropped."""
    changes = parse_changes(raw, cls)
    for spec in field_specs(cls):
        if spec.item_model is not None and spec.name in changes:
            changes[spec.name] = [spec.item_model(**item) for item in changes[spec.name]]
    return cls(**changes)


def parse_sync_ids(body: bytes, fmt: Format) -> list[int]:
    """`<invoices><ids><id>1</id>…</ids></invoices>`; several `ids` elements are an error."""
    raw = parse_body(body, fmt, "invoices")
    ids = raw.get("ids")
    if isinstance(ids, list) and fmt == "xml":
        raise Unprocessable([FieldError("ids", "give one ids element with id children")])
    if fmt == "xml":
        if not isinstance(ids, dict):
            return []
        ids = ids.get("id", [])
    if not isinstance(ids, list):
        ids = [ids]
    try:
        return [int(i) for i in ids]
    except (TypeError, ValueError):
        raise Unprocessable([FieldError("ids", "must be integers")]) from None


# -- how a body is sent: whole, streamed in pieces, or cut short (a fault)


@attrs.frozen
class Streamed:
    """A body sent chunked, each piece encoded only when the previous one has gone."""

    pieces: Iterator[bytes]


Body = bytes | Streamed


def content_type(fmt: Format) -> str:
    return "application/json; charset=utf-8" if fmt == "json" else "application/xml; charset=utf-8"


async def truncated(
    request: web.Request, status: int, payload: bytes, fmt: Format, headers: dict[str, str]
) -> web.StreamResponse:
    """Promise the whole of `payload` (Content-Length), send half, close the connection."""
    response = web.StreamResponse(status=status, headers=headers)
    response.content_type = content_type(fmt).split(";")[0]
    response.content_length = len(payload)
    await response.prepare(request)
    await response.write(payload[: len(payload) // 2])
    assert request.transport is not None
    request.transport.close()
    return response


async def streamed(
    request: web.Request, status: int, body: Streamed, headers: dict[str, str]
) -> web.StreamResponse:
    """Send `body` chunked, encoding each piece after the previous one is written."""
    response = web.StreamResponse(status=status, headers=headers)
    response.enable_chunked_encoding()
    await response.prepare(request)
    try:
        for piece in body.pieces:
            await response.write(piece)
            await asyncio.sleep(0)  # let the loop's other work in between pieces
        await response.write_eof()
    except ConnectionError:
        pass  # the client went away mid-list: nothing more to send
    return response


Result = tuple[int, Body, dict[str, str]]
Handler = Callable[["Call"], Awaitable[Result]]


@attrs.frozen
class Call:
    """One authenticated API request as the handlers see it."""

    account: Account
    request: web.Request
    fmt: Format
    params: dict[str, str]
    body: bytes


def _fmt(request: web.Request) -> Format:
    accept = request.headers.get("Accept", "")
    if "json" in accept or request.path.endswith(".json"):
        return "json"
    return "xml"


def _ok(status: int, body: Body, **headers: str) -> Result:
    return status, body, dict(headers)


def _invoice_list(c: Call, invoices: Sequence[Invoice]) -> Body:
    """A list document of invoices from the account's kept documents; long ones streamed."""
    if len(invoices) > STREAM_INVOICES:
        return Streamed(c.account.documents.list_chunks(invoices, c.fmt))
    return c.account.documents.list_body(invoices, c.fmt)


def _invoice(c: Call, invoice: Invoice) -> bytes:
    return c.account.documents.document(invoice, c.fmt)


# -- handlers: a call in, (status, body, extra headers) out ----------------------------------


async def list_invoices(c: Call) -> Result:
    return _ok(200, _invoice_list(c, c.account.list_invoices(c.params.get("filter"))))


async def advanced_filter(c: Call) -> Result:
    params = parse_body(c.body, c.fmt, "filter") if c.body.strip() else {}
    return _ok(200, _invoice_list(c, c.account.advanced_filter(params)))


async def get_invoice(c: Call) -> Result:
    return _ok(200, _invoice(c, c.account.get_invoice(int(c.params["id"]))))


async def get_by_number(c: Call) -> Result:
    for invoice in c.account.invoices.values():
        if invoice.invoice_id == c.params["number"]:
            return _ok(200, _invoice(c, invoice))
    raise Missing(c.params["number"])


async def create_invoice(c: Call) -> Result:
    invoice = c.account.create_invoice(parse_model(parse_body(c.body, c.fmt, "invoice"), Invoice))
    location = str(c.request.url.with_path(f"{API_PREFIX}/invoices/{invoice.id}.xml"))
    return _ok(201, _invoice(c, invoice), Location=location)


async def update_invoice(c: Call) -> Result:
    changes = parse_changes(parse_body(c.body, c.fmt, "invoice"), Invoice)
    invoice = c.account.update_invoice(int(c.params["id"]), changes)
    return _ok(200, _invoice(c, invoice))


async def send_invoice(c: Call) -> Result:
    payload = parse_body(c.body, c.fmt, "invoice")
    reminder = c.params["action"] == "send_reminder"
    invoice = c.account.send_invoice(int(c.params["id"]), payload, reminder=reminder)
    return _ok(200, _invoice(c, invoice))


async def register_payment(c: Call) -> Result:
    """201 with the updated invoice, not the payment, as the service answered (field notes)."""
    payment = parse_model(parse_body(c.body, c.fmt, "payment"), InvoicePayment)
    invoice = c.account.register_payment(int(c.params["id"]), payment)
    return _ok(201, _invoice(c, invoice))


async def delete_invoice(c: Call) -> Result:
    c.account.delete_invoice(int(c.params["id"]))
    return _ok(200, b"")


async def sync_list(c: Call) -> Result:
    entries = c.account.sync_list()  # a snapshot: the pieces are encoded from it later
    pieces = sync_chunks(entries, c.fmt)
    body: Body = Streamed(pieces) if len(entries) > STREAM_SYNC_ENTRIES else b"".join(pieces)
    plan = c.account.faults
    if plan.mutate_after_list and entries:
        for entry in plan.rng.sample(entries, min(plan.mutate_after_list, len(entries))):
            c.account.mutate(entry.id)
            c.account.counters["changed after list"] += 1
    return _ok(200, body)


async def sync_fetch(c: Call) -> Result:
    return _ok(200, _invoice_list(c, c.account.sync_fetch(parse_sync_ids(c.body, c.fmt))))


async def list_templates(c: Call) -> Result:
    return _ok(200, dump_list(list(c.account.templates.values()), c.fmt, RecurringTemplate))


async def get_template(c: Call) -> Result:
    return _ok(200, dump_model(c.account.get_template(int(c.params["id"])), c.fmt, mode="document"))


async def create_template(c: Call) -> Result:
    data = parse_model(parse_body(c.body, c.fmt, "recurring_template"), RecurringTemplate)
    template = c.account.create_template(data)
    location = str(c.request.url.with_path(f"{API_PREFIX}/recurring_templates/{template.id}.xml"))
    return _ok(201, dump_model(template, c.fmt, mode="document"), Location=location)


async def update_template(c: Call) -> Result:
    changes = parse_changes(parse_body(c.body, c.fmt, "recurring_template"), RecurringTemplate)
    template = c.account.update_template(int(c.params["id"]), changes)
    return _ok(200, dump_model(template, c.fmt, mode="document"))


async def delete_template(c: Call) -> Result:
    c.account.delete_template(int(c.params["id"]))
    return _ok(200, b"")


async def current_session(c: Call) -> Result:
    return _ok(200, dump_model(c.account.session(), c.fmt, mode="document"))


# Order matters: fixed names before `:id`.
ROUTES: list[tuple[re.Pattern[str], dict[str, Handler]]] = [
    (re.compile(r"/invoices"), {"GET": list_invoices, "POST": create_invoice}),
    (re.compile(r"/invoices/sync_list_ids"), {"GET": sync_list}),
    (re.compile(r"/invoices/sync_fetch_ids"), {"POST": sync_fetch}),
    (re.compile(r"/invoices/filter/advanced"), {"POST": advanced_filter}),
    (re.compile(r"/invoices/filter/(?P<filter>[^/]+)"), {"GET": list_invoices}),
    (re.compile(r"/invoices/invoice_id/(?P<number>[^/]+)"), {"GET": get_by_number}),
    (
        re.compile(r"/invoices/(?P<id>\d+)"),
        {"GET": get_invoice, "PUT": update_invoice, "DELETE": delete_invoice},
    ),
    (
        re.compile(r"/invoices/(?P<id>\d+)/(?P<action>send_invoice|send_reminder)"),
        {"PUT": send_invoice},
    ),
    (re.compile(r"/invoices/(?P<id>\d+)/payments"), {"POST": register_payment}),
    (re.compile(r"/recurring_templates"), {"GET": list_templates, "POST": create_template}),
    (
        re.compile(r"/recurring_templates/(?P<id>\d+)"),
        {"GET": get_template, "PUT": update_template, "DELETE": delete_template},
    ),
    (re.compile(r"/current_session"), {"GET": current_session}),
]
_NOT_IN_API = re.compile(
    r"/(invoices|recurring_templates)/\d+/[a-z_]+|/(" + "|".join(_OTHER_AREAS) + r")(/.*)?"
)


def _route(path: str, method: str) -> tuple[Handler | None, dict[str, str], int]:
    """(handler, params, status if no handler): 404 unknown, 406 not in API, 501 method;
    HEAD is served by the GET handler, as Rails did."""
    for pattern, methods in ROUTES:
        match = pattern.fullmatch(path)
        if match:
            handler = methods.get("GET" if method == "HEAD" else method)
            if handler is None:
                return None, {}, 501
            params = {k: v for k, v in match.groupdict().items() if v is not None}
            return handler, params, 0
    if _NOT_IN_API.fullmatch(path):
        return None, {}, 406
    return None, {}, 404


class Served(Protocol):
    """What the app needs of the service it serves (`FakeInvoicingService`)."""

    accounts: dict[str, Account]
    oauth1: OAuth1Verifier | None
    port_per_account: bool
    unauthorized: int

    def serves(self, account: Account, local_port: int | None) -> bool: ...


def _basic_account(service: Served, token: str) -> Account | None:
    try:
        user, _, password = base64.b64decode(token, validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    account = service.accounts.get(user)
    if account is None or not secrets.compare_digest(account.password, password):
        return None
    return account


def _authenticate(service: Served, request: web.Request, body: bytes) -> Account | None:
    """The account a request acts for: HTTP Basic, or OAuth 1.0a when the service has it."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    account = None
    if scheme.lower() == "basic":
        account = _basic_account(service, token)
    elif scheme.lower() == "oauth" and service.oauth1 is not None:
        user = service.oauth1.verify(request.method, str(request.url), request.headers, body)
        account = None if user is None else service.accounts.get(user)
    if account is None:
        return None
    if service.port_per_account:  # each account on its own port only
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        if not service.serves(account, sockname[1] if sockname else None):
            return None
    return account


def _error_body(fmt: Format, message: str) -> bytes:
    return dump_field_errors([FieldError(None, message)], fmt)


def build_app(service: Served) -> web.Application:
    """The aiohttp application serving every account of `service`."""

    async def handle(request: web.Request) -> web.StreamResponse:
        fmt = _fmt(request)
        body = await request.read()
        account = _authenticate(service, request, body)
        if account is None:
            service.unauthorized += 1
            challenges = ['Basic realm="Application"']
            if service.oauth1 is not None:
                challenges.append('OAuth realm="Application"')
            return web.Response(
                status=401,
                body=b"HTTP Basic: Access denied.\n",
                headers={"WWW-Authenticate": ", ".join(challenges)},
            )
        # The hourly budget spent (or cut by a fault): 403, and 0 left whatever the window says.
        account.requests_total += 1
        cut = account.faults.budget_cut_after
        refused = (cut is not None and account.requests_total > cut) or not account.window.take()
        if not refused:
            account.in_flight += 1
            try:
                status, payload, headers = await _dispatch(account, request, fmt, body)
            finally:
                account.in_flight -= 1
        else:
            account.counters["403"] += 1
            status, payload, headers = 403, b"Rate limit exceeded", {}
        headers = {
            **headers,
            "X-RateLimit-Limit": str(account.window.limit),
            "X-RateLimit-Remaining": "0" if refused else str(account.window.remaining),
        }
        account.requests.append(
            RecordedRequest(
                account=account.name,
                method=request.method,
                path=request.path_qs,
                headers={k: v for k, v in request.headers.items() if k.lower() != "authorization"},
                body=body if account.record_bodies else b"",
                status=status,
                at=account.clock.timestamp(),
            )
        )
        plan = account.faults
        head = request.method == "HEAD"
        if head and isinstance(payload, Streamed):
            payload = Streamed(iter(()))  # a HEAD answer has no body: nothing to encode
        if (
            not head
            and plan.applies_to(request.path)
            and status < 400
            and plan.roll(plan.truncate_rate)
        ):
            account.counters["truncated"] += 1
            whole = b"".join(payload.pieces) if isinstance(payload, Streamed) else payload
            return await truncated(request, status, whole, fmt, headers)
        # The service's clock is the account's (fake) clock, also in the Date header.
        headers["Date"] = email.utils.formatdate(account.clock.timestamp(), usegmt=True)
        if isinstance(payload, Streamed):
            headers["Content-Type"] = content_type(fmt)
            return await streamed(request, status, payload, headers)
        response = web.Response(status=status, body=payload, headers=headers)
        if payload:
            response.headers["Content-Type"] = content_type(fmt)
        return response

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def _dispatch(account: Account, request: web.Request, fmt: Format, body: bytes) -> Result:
    """Injected faults, routing and the operation itself."""
    injected = await _inject_faults(account, request, fmt)
    if injected is not None:
        return injected
    path = request.path
    if not path.startswith(API_PREFIX + "/"):
        return 404, _error_body(fmt, "Not found"), {}
    path = re.sub(r"\.(xml|json)$", "", path[len(API_PREFIX) :])
    handler, params, status = _route(path, request.method)
    if handler is None:
        messages = {404: "Not found", 406: "Not accepted", 501: "Method not implemented"}
        return status, _error_body(fmt, messages[status]), {}
    account.counters[handler.__name__] += 1
    account.refresh()
    try:
        result = await handler(Call(account, request, fmt, params, body))
    except Missing as exc:
        return 404, _error_body(fmt, f"Not found: {exc}"), {}
    except Unprocessable as exc:
        return 422, dump_field_errors(exc.errors, fmt), {}
    if handler in _WRITES:
        return await _lose_answer(account, request, fmt, result)
    return result


def _write_kind(path: str) -> str:
    """The counters' name of a write: create, send, reminder, payment, template or other."""
    for part, kind in (
        ("send_invoice", "send"),
        ("send_reminder", "reminder"),
        ("payments", "payment"),
        ("recurring_templates", "template"),
        ("invoices.", "create"),
    ):
        if part in path:
            return kind
    return "other"


_WRITES = frozenset({create_invoice, send_invoice, register_payment, create_template})


async def _lose_answer(
    account: Account, request: web.Request, fmt: Format, result: Result
) -> Result:
    """The faults of an applied write: its answer dropped, replaced by a 500, or held."""
    plan = account.faults
    if not plan.applies_to(request.path):
        return result
    kind = _write_kind(request.path)
    if plan.roll(plan.applied_drop_rate):
        account.counters["applied, dropped"] += 1
        account.counters[f"answer lost: {kind}"] += 1
        assert request.transport is not None
        request.transport.close()
        raise asyncio.CancelledError  # nothing more to send on a closed connection
    if plan.roll(plan.applied_timeout_rate):
        account.counters["applied, held"] += 1
        account.counters[f"answer lost: {kind}"] += 1
        await asyncio.sleep(plan.timeout_delay)
    if plan.roll(plan.applied_error_rate):
        account.counters["applied, 500"] += 1
        account.counters[f"answer lost: {kind}"] += 1
        return 500, _error_body(fmt, "Internal server error (injected, after applying)"), {}
    return result


async def _inject_faults(account: Account, request: web.Request, fmt: Format) -> Result | None:
    """Latency, a gate, dropped connections, held responses and 500s, as the fault plan says."""
    plan = account.faults
    if plan.latency:
        await asyncio.sleep(plan.latency)
    if not plan.applies_to(request.path):
        return None
    if plan.gate is not None and not plan.gate.is_set():
        account.counters["gated"] += 1
        await plan.gate.wait()
    if plan.roll(plan.drop_rate):
        account.counters["dropped"] += 1
        if request.method in ("POST", "PUT"):
            account.counters[f"answer lost: {_write_kind(request.path)}"] += 1
        assert request.transport is not None
        request.transport.close()
        raise asyncio.CancelledError  # nothing more to send on a closed connection
    if plan.roll(plan.timeout_rate):
        account.counters["held"] += 1
        await asyncio.sleep(plan.timeout_delay)
    if plan.roll(plan.error_rate):
        account.counters["500"] += 1
        return 500, _error_body(fmt, "Internal server error (injected)"), {}
    return None


def redirect_app(target: Callable[[], str]) -> web.Application:
    """The plain-http listener: 302 to the same path on the https listener."""

    async def handle(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(target() + request.path_qs)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
