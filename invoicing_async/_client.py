"""`InvoicingClient`: one account's API, as an async context manager."""

from __future__ import annotations

import copy
import datetime as dt
import ssl as ssl_module
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import attrs
from yarl import URL

from invoicing_async._budget.budget import RateBudget, spender_of
from invoicing_async._models.documents import Format, load_document, load_model
from invoicing_async._models.payloads import dump_document
from invoicing_async._resources.invoices import InvoicesResource
from invoicing_async._resources.raw import APIResponse, RawOperations, RecordingTransport
from invoicing_async._resources.recurring_templates import RecurringTemplatesResource
from invoicing_async._transport.auth import Auth
from invoicing_async._transport.environment import settings_from_env
from invoicing_async._transport.http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    BoundTransport,
    CallOptions,
    HTTPTransport,
    RequestEvent,
)
from invoicing_async._transport.retry import RetryPolicy
from invoicing_async._transport.sender import Sender
from invoicing_async._transport.urls import account_host, request_path
from invoicing_async._writes.journal import Journal, open_journal
from invoicing_async._writes.once import Writes
from invoicing_async.errors import ConfigurationError
from invoicing_async.models import CurrentSession, Invoice

__all__ = ["InvoicingClient"]

_UNSET: Any = object()


class InvoicingClient:
    """A client of one account's API.

    Use it as ``async with InvoicingClient(...) as client:``; it then creates its aiohttp
    session inside the running loop and closes it on exit. A session you pass in
    (`session=`) is used as is and never closed. Without `async with`, the session is
    created on the first request and closed by `await client.aclose()`.

    `budget` is the account's `RateBudget` (350 requests per hour by default): give
    every client of the same account the same instance. A request that would wait
    longer than `max_wait` seconds for budget raises `RateLimitExceeded` at once
    (`None`: wait as long as it takes). `timeout` bounds each attempt; `deadline`, when
    set, bounds the whole call (budget wait, retries and backoff included).
    `with_options()` changes these for the calls made through the copy it returns.

    `journal` records keyed writes (`idempotency_key=`): in memory by default, or
    ``sqlite:///writes.sqlite3`` / a ``postgresql://`` URL to survive restarts and be shared
    by processes. `write_marker` is the invoice attribute that carries a create's key.

    Requests go through the proxy of `HTTPS_PROXY` (`HTTP_PROXY` for http) unless
    `NO_PROXY` names the host, as most HTTP clients do; `trust_env=False` ignores them. A
    session you pass in follows its own `trust_env`.
    """

    def __init__(
        self,
        base_url: str | URL,
        *,
        auth: Auth,
        format: Format = "xml",
        budget: RateBudget | None = None,
        session: aiohttp.ClientSession | None = None,
        ssl: ssl_module.SSLContext | bool | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        max_wait: float | None = 60.0,
        deadline: float | None = None,
        api_prefix: str = "/api/v1.0",
        validate: bool = True,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        user_agent: str | None = None,
        on_request: Callable[[RequestEvent], None] | None = None,
        trace_configs: list[aiohttp.TraceConfig] | None = None,
        trust_env: bool = True,
        sender: Sender | None = None,
        today: Callable[[], dt.date] = dt.date.today,
        journal: str | Journal | None = None,
        write_marker: str = "po_number",
    ) -> None:
        budget = budget if budget is not None else RateBudget()
        options = CallOptions(
            timeout=aiohttp.ClientTimeout(total=timeout, connect=connect_timeout),
            max_wait=max_wait,
            retry=retry if retry is not None else RetryPolicy(),
            deadline=deadline,
        )
        self._transport = HTTPTransport(
            base_url,
            auth=auth,
            fmt=format,
            budget=budget,
            options=options,
            api_prefix=api_prefix,
            session=session,
            ssl=ssl,
            sender=sender,
            max_response_bytes=max_response_bytes,
            user_agent=user_agent,
            on_request=on_request,
            trace_configs=trace_configs,
            trust_env=trust_env,
        )
        spender_of(budget).bind(account_host(self._transport.base_url))
        self._writes = Writes(open_journal(journal), account_host(self._transport.base_url))
        self._write_marker = _checked_marker(write_marker)
        self._validate = validate
        self._today = today
        self._bind(options)

    def _bind(self, options: CallOptions) -> None:
        """Point the resources at the transport with these per-call settings."""
        self._options = options
        bound = BoundTransport(self._transport, options)
        self._requester = bound
        self.invoices = InvoicesResource(
            bound, validate=self._validate, today=self._today, writes=self._writes
        )
        self.invoices._marker = self._write_marker  # noqa: SLF001 - the client's choice
        self.recurring_templates = RecurringTemplatesResource(
            bound, validate=self._validate, today=self._today, writes=self._writes
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> InvoicingClient:
        """A client configured from `INVOICING_BASE_URL`, `INVOICING_FORMAT` and the
        credentials (`INVOICING_USERNAME`/`_PASSWORD`, or the four OAuth 1 variables).

        Keyword arguments are passed on (`budget=`, `ssl=`…) and override the format.
        Raises `ConfigurationError` naming what is missing.
        """
        settings = settings_from_env(environ)
        kwargs.setdefault("format", settings.format)
        return cls(settings.base_url, auth=settings.auth, **kwargs)

    def with_options(
        self,
        *,
        max_wait: float | None = _UNSET,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        retry: RetryPolicy | None = None,
        background: bool | None = None,
        deadline: float | None = _UNSET,
    ) -> InvoicingClient:
        """The same client (session, budget, counters) with other per-call settings.

        ``client.with_options(max_wait=0).invoices.get(42)`` fails at once when the budget
        is spent (a web handler); the original client keeps waiting (a batch job).
        ``background=True`` leaves the budget's `reserve` to interactive calls (the sync
        engine's requests are background).
        """
        options = self._options
        current = options.timeout
        if timeout is not None or connect_timeout is not None:
            current = aiohttp.ClientTimeout(
                total=timeout if timeout is not None else current.total,
                connect=connect_timeout if connect_timeout is not None else current.connect,
            )
        changed = attrs.evolve(
            options,
            timeout=current,
            max_wait=options.max_wait if max_wait is _UNSET else max_wait,
            retry=retry if retry is not None else options.retry,
            background=options.background if background is None else background,
            deadline=options.deadline if deadline is _UNSET else deadline,
        )
        clone = copy.copy(self)
        clone._bind(changed)  # noqa: SLF001 - setting up the copy of self
        return clone

    def __repr__(self) -> str:
        return (
            f"InvoicingClient({str(self._transport.base_url)!r}, format={self.format!r}, "
            f"auth={self._transport.auth!r})"
        )

    @property
    def format(self) -> Format:
        return self._transport.fmt

    @property
    def base_url(self) -> URL:
        return self._transport.base_url

    @property
    def budget(self) -> RateBudget:
        """The account's request budget: `client.budget.snapshot()` for progress displays."""
        return self._transport.budget

    @property
    def requests_sent(self) -> int:
        """Every HTTP request this client sent, retries and redirects included."""
        return self._transport.requests_sent

    @property
    def is_closed(self) -> bool:
        """True after `aclose()` (or the end of `async with`): make a new client then."""
        return self._transport.is_closed

    @property
    def with_raw_response(self) -> RawOperations[InvoicingClient]:
        """The client's own operation with its HTTP answer:
        ``raw = await client.with_raw_response.current_session()`` (an `APIResponse`)."""
        return RawOperations(self._requester, self._rewired, frozenset({"current_session"}))

    def _rewired(self, transport: BoundTransport) -> InvoicingClient:
        """This client sending its own operation through `transport` (the raw view's)."""
        clone = copy.copy(self)
        clone._requester = transport  # noqa: SLF001 - setting up the copy of self
        return clone

    async def current_session(self) -> CurrentSession:
        """The session and active user: GET /current_session.xml (root `<user>`)."""
        response = await self._requester.request("GET", "/current_session.xml")
        return load_model(response.body, self.format, CurrentSession)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Mapping[str, Any] | bytes | None = None,
    ) -> APIResponse[Any]:
        """Any call of the API, for what the SDK has no method of (contacts, tax rates…),
        through this client's budget, retries, auth and errors.

        `path` is below the API prefix, `/contacts` or `/contacts/3`; the client's format
        suffix (`.xml`/`.json`) is added when the last segment has none. `params` become the
        query. `body` is one root, ``{"contact": {"firstname": "Ann"}}``, written in the
        client's format (or bytes, sent as they are). A status other than 2xx raises its
        error (`NotAcceptableError` for an area the API does not serve); GET and DELETE are
        retried as the SDK's own calls, POST and PUT never once they may have arrived.
        Returns an `APIResponse`: ``.parse()`` the body as plain data (JSON as sent, XML as
        ``{root: content}``), ``.content`` its bytes, ``.json()``, status and headers.
        """
        verb = method.upper()
        payload = (
            body if body is None or isinstance(body, bytes) else dump_document(body, self.format)
        )
        target = request_path(path, self.format, params)
        recorder = RecordingTransport(self._requester)
        response = await recorder.request(verb, target, body=payload)
        fmt = self.format
        return APIResponse(
            response,
            elapsed=recorder.elapsed,
            requests=recorder.requests,
            decode=lambda content: load_document(content, fmt),
        )

    async def resolve_pending_writes(self) -> dict[str, bool]:
        """Settle, by looking at the service, the keyed writes a process that died mid-write
        left pending in the journal: {key: applied} (a key not applied is freed to be used
        again). Keys another live writer holds are left to it. 0 requests when none pend."""
        settled: dict[str, bool] = {}
        for record in await self._writes.journal.pending(self._writes.scope):
            kind = record.intent.kind
            resource = self.recurring_templates if kind == "create_template" else self.invoices
            outcome = await self._writes.settle(record.intent, resource._look)  # noqa: SLF001
            if outcome is not None:
                settled[record.intent.key] = outcome
        return settled

    async def aclose(self) -> None:
        """Close the aiohttp session if this client created it (and every copy's with it),
        and the write journal."""
        await self._transport.close()
        await self._writes.journal.close()

    async def __aenter__(self) -> InvoicingClient:
        self._transport.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _checked_marker(name: str) -> str:
    """`write_marker` must name a text attribute of `Invoice` that clients set."""
    spec = next((f for f in attrs.fields(Invoice) if f.name == name), None)
    if spec is None or spec.metadata.get("invoicing.read_only") or "str" not in str(spec.type):
        raise ConfigurationError(
            f"write_marker={name!r}: name a text attribute of Invoice that clients set "
            "(po_number, the default, or description)"
        )
    return name
