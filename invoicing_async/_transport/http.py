"""The session wrapper every request goes through: auth, budget, retries, redirects, error
mapping and logging around one `Sender` (the decisions live in pure modules)."""

from __future__ import annotations

import asyncio
import logging
import ssl as ssl_module
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
import attrs
from yarl import URL

from invoicing_async import _telemetry as _opentelemetry
from invoicing_async._budget.budget import RateBudget, spender_of
from invoicing_async._models.documents import Format
from invoicing_async._text import package_logger
from invoicing_async._transport import telemetry as _telemetry
from invoicing_async._transport.auth import Auth
from invoicing_async._transport.failures import SendError, describe_timeout
from invoicing_async._transport.redirects import (
    MAX_REDIRECTS,
    REDIRECT_STATUSES,
    next_hop,
)
from invoicing_async._transport.response import (
    Response,
    error_for,
    is_budget_refusal,
    rate_headers,
    retry_after_seconds,
)
from invoicing_async._transport.retry import RETRY_STATUSES, RetryPolicy
from invoicing_async._transport.sender import (
    DEFAULT_MAX_RESPONSE_BYTES,
    AiohttpSender,
    OutgoingRequest,
    Sender,
)
from invoicing_async._transport.urls import (
    account_host,
    endpoint_url,
    normalize_prefix,
    validate_base_url,
)
from invoicing_async._version import __version__
from invoicing_async.errors import (
    APITimeoutError,
    ClientClosedError,
    RateLimitExceeded,
    RedirectError,
    ResponseTooLargeError,
)

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "BoundTransport",
    "CallOptions",
    "HTTPTransport",
    "RequestEvent",
]

logger = package_logger("invoicing_async")

CONTENT_TYPES: dict[str, str] = {"xml": "application/xml", "json": "application/json"}


@attrs.frozen
class RequestEvent:
    """One request as it went out, for metrics hooks (never carries credentials)."""

    method: str
    url: str
    status: int | None
    elapsed: float
    attempt: int
    budget_remaining: int
    error: str | None = None


@attrs.frozen
class CallOptions:
    """Settings that may differ per call (`client.with_options(...)`)."""

    timeout: aiohttp.ClientTimeout
    max_wait: float | None
    retry: RetryPolicy
    background: bool = False  # leaves the budget's reserve to interactive calls
    deadline: float | None = None  # seconds for the whole call: budget, attempts, backoff


class HTTPTransport:
    """Sends requests to one account's API through a `Sender` (aiohttp by default)."""

    def __init__(
        self,
        base_url: str | URL,
        *,
        auth: Auth,
        fmt: Format,
        budget: RateBudget,
        options: CallOptions,
        api_prefix: str = "/api/v1.0",
        session: aiohttp.ClientSession | None = None,
        ssl: ssl_module.SSLContext | bool | None = None,
        sender: Sender | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        user_agent: str | None = None,
        on_request: Callable[[RequestEvent], None] | None = None,
        trace_configs: list[aiohttp.TraceConfig] | None = None,
        trust_env: bool = True,
    ) -> None:
        if fmt not in CONTENT_TYPES:
            raise ValueError(f"format must be 'xml' or 'json', not {fmt!r}")
        self.base_url = validate_base_url(base_url)
        self.auth = auth
        self.fmt = fmt
        self.budget = budget
        self._spender = spender_of(budget)
        self.options = options
        self.api_prefix = normalize_prefix(api_prefix)
        self.max_response_bytes = max_response_bytes
        self.user_agent = (
            user_agent or f"invoicing-async/{__version__} aiohttp/{aiohttp.__version__}"
        )
        self._headers = {"Accept": CONTENT_TYPES[fmt], "User-Agent": self.user_agent}
        self.on_request = on_request
        self.sender: Sender = sender or AiohttpSender(
            session=session, ssl=ssl, trace_configs=trace_configs, trust_env=trust_env
        )
        #: Decided once, here: with OpenTelemetry configured every call is a span and every
        #: send is measured (configure it before making the client).
        self.traced = _opentelemetry.configured()
        if self.traced:
            self.sender = _telemetry.TracedSender(self.sender)
        self._closed = False
        self.requests_sent = 0  # every HTTP request, retries and redirects included
        # After the service upgraded us from http to https, go there directly.
        self._origin = self.base_url

    @property
    def is_closed(self) -> bool:
        """True once `close()` ran: the transport sends nothing more."""
        return self._closed

    def open(self) -> None:
        """Prepare the sender inside the running loop (creates the aiohttp session)."""
        self._check_open()
        self.sender.open()

    async def close(self) -> None:
        """Close the sender's session if it owns one; a borrowed session is left open."""
        self._closed = True
        await self.sender.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(
                "this client is closed: create a new InvoicingClient "
                "(or use this one inside its `async with` block)"
            )

    def url_for(self, path: str) -> URL:
        """`/invoices.xml` -> `https://host/api/v1.0/invoices.xml` (path already escaped)."""
        return endpoint_url(self._origin, self.api_prefix, path)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        options: CallOptions | None = None,
        idempotent: bool = False,
    ) -> Coroutine[Any, Any, Response]:
        """Send one API call with retries; returns the 2xx response or raises its error.

        `idempotent` marks a PUT that may be repeated (it only sets attributes). With a
        `deadline`, the whole call ends in `APITimeoutError` when it runs out, and a budget wait
        longer than what is left fails at once with `RateLimitExceeded`."""
        opts = options or self.options
        if self.traced:
            return _telemetry.traced_request(
                self, method, path, body=body, options=opts, idempotent=idempotent
            )
        return self.untraced_request(method, path, body=body, options=opts, idempotent=idempotent)

    def untraced_request(
        self, method: str, path: str, *, body: bytes | None, options: CallOptions, idempotent: bool
    ) -> Coroutine[Any, Any, Response]:
        """`request` without its span (what a traced call runs inside its span)."""
        opts = options
        if opts.deadline is None:
            return self._request(method, path, body, opts, None, idempotent=idempotent)
        return self._request_within_deadline(method, path, body, opts, idempotent=idempotent)

    async def _request_within_deadline(
        self, method: str, path: str, body: bytes | None, opts: CallOptions, *, idempotent: bool
    ) -> Response:
        assert opts.deadline is not None
        attempts: list[int] = []
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(
                self._request(
                    method,
                    path,
                    body,
                    opts,
                    loop.time() + opts.deadline,
                    attempts,
                    idempotent=idempotent,
                ),
                opts.deadline,
            )
        except asyncio.TimeoutError:
            url = self.url_for(path)
            raise APITimeoutError(
                f"{method} {url}: no answer within deadline={opts.deadline:g}s "
                f"({len(attempts)} attempt(s), per-attempt {describe_timeout(opts.timeout)})",
                method=method,
                url=str(url),
            ) from None

    async def _request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        opts: CallOptions,
        deadline_at: float | None,
        attempts: list[int] | None = None,
        *,
        idempotent: bool = False,
    ) -> Response:
        policy = opts.retry
        loop = asyncio.get_running_loop()
        started = loop.time()
        attempt = 0
        while True:
            attempt += 1
            if attempts is not None:
                attempts.append(attempt)
            url = self.url_for(path)
            attempt_opts = opts
            if deadline_at is not None:
                left = max(0.0, deadline_at - loop.time())
                max_wait = left if opts.max_wait is None else min(opts.max_wait, left)
                attempt_opts = attrs.evolve(opts, max_wait=max_wait)
            try:
                response, retry_after = await self._send(method, url, body, attempt, attempt_opts)
            except SendError as failure:
                if (
                    failure.retryable
                    and self._may_retry(policy, attempt, started, loop)
                    and policy.retries_error(
                        method, connected=failure.connected, idempotent=idempotent
                    )
                ):
                    await self._backoff(policy, method, url, attempt, None, str(failure.error))
                    continue
                raise failure.error from failure.error.__cause__
            except RateLimitExceeded as refused:  # by the budget, before anything was sent
                self._log_refusal(method, url, refused, attempt_opts)
                raise
            status = response.status
            if 200 <= status < 300:
                return response
            if (
                status in RETRY_STATUSES
                and policy.retries_status(method, status, idempotent=idempotent)
                and self._may_retry(policy, attempt, started, loop)
            ):
                after = retry_after_seconds(response.headers)
                await self._backoff(policy, method, url, attempt, after, f"status {status}")
                continue
            if method == "DELETE" and attempt > 1 and status == 404:
                # An earlier attempt deleted it and its answer was lost: done.
                logger.info("DELETE %s: retry found it gone; taking the delete as done", url.path)
                return response
            error = error_for(
                status,
                response.headers,
                response.body,
                fmt=self.fmt,
                method=method,
                url=response.url,
                retry_after=retry_after,
            )
            if error is not None:
                raise error
            return response

    def _log_refusal(
        self, method: str, url: URL, refused: RateLimitExceeded, opts: CallOptions
    ) -> None:
        """One warning a refused call: the account's host, the wait it would have needed,
        and the budget left (an operator otherwise sees only the app's own 503s)."""
        host = account_host(self.base_url)
        wait, left = refused.retry_after, self.budget.snapshot().remaining
        logger.warning(
            "%s %s refused without sending: %s's budget would need ~%.0fs (max_wait=%s), %d left",
            method,
            url.path,
            host,
            wait if wait is not None else float("nan"),
            "none" if opts.max_wait is None else f"{opts.max_wait:g}s",
            left,
            extra={"host": host, "would_wait": wait, "budget_left": left},
        )

    @staticmethod
    def _may_retry(
        policy: RetryPolicy, attempt: int, started: float, loop: asyncio.AbstractEventLoop
    ) -> bool:
        return attempt < policy.attempts and loop.time() - started < policy.max_total

    @staticmethod
    async def _backoff(
        policy: RetryPolicy,
        method: str,
        url: URL,
        attempt: int,
        retry_after: float | None,
        why: str,
    ) -> None:
        delay = policy.delay(attempt, retry_after)
        logger.warning(
            "%s %s failed (%s); retry %d/%d in %.2fs",
            method,
            url.path,
            why,
            attempt,
            policy.attempts - 1,
            delay,
        )
        await asyncio.sleep(delay)

    async def _send(
        self, method: str, url: URL, body: bytes | None, attempt: int, opts: CallOptions
    ) -> tuple[Response, float | None]:
        """One request: a unit of the budget, the exchange, the unit settled with the
        server's word; following the service's http->https redirect on the same host."""
        if self._closed:
            self._check_open()
        spender = self._spender
        hold = opts.timeout.total  # a request's time in flight is bounded by its timeout
        text = str(url)  # formatted once per hop: auth, loop detection and the response
        seen: frozenset[str] = frozenset()
        traced = _telemetry.current_call()
        for _ in range(MAX_REDIRECTS + 1):
            permit = await spender.take(
                max_wait=opts.max_wait,
                background=opts.background,
                hold=hold,
                on_wait=None if traced is None else traced.note_budget_wait,
            )
            self.requests_sent += 1
            headers = self._headers.copy()  # format and user agent, content type, auth
            content_type = None
            if body is not None:
                content_type = headers["Content-Type"] = headers["Accept"]
            headers.update(self.auth.headers_for(method, text, body, content_type))
            request = OutgoingRequest(
                method=method,
                url=url,
                headers=headers,
                body=body,
                timeout=opts.timeout,
                max_response_bytes=self.max_response_bytes,
            )
            reporting = self.on_request is not None or logger.isEnabledFor(logging.DEBUG)
            started = asyncio.get_running_loop().time() if reporting else 0.0
            try:
                raw = await self.sender.send(request)
            except SendError as failure:
                # A request that never connected never reached the server: unit back.
                await spender.settle(permit, sent=failure.connected)
                if reporting:
                    elapsed = asyncio.get_running_loop().time() - started
                    self._report(method, url, None, elapsed, attempt, type(failure.error))
                raise
            except BaseException:
                # Cancelled mid-flight: it may have arrived; the unit comes back a period on.
                await asyncio.shield(spender.settle(permit))
                raise
            status = raw.status
            limit, remaining = rate_headers(raw.headers)
            refused = status == 403 and is_budget_refusal(status, raw.headers, raw.body)
            retry_after = await spender.settle(
                permit, limit=limit, remaining=remaining, refused=refused
            )
            if len(raw.body) > self.max_response_bytes:  # a sender that does not stream
                raise ResponseTooLargeError(
                    f"{method} {url}: response exceeds max_response_bytes={self.max_response_bytes}"
                )
            if reporting:
                elapsed = asyncio.get_running_loop().time() - started
                self._report(method, url, status, elapsed, attempt, None)
            hop = None
            if status in REDIRECT_STATUSES:
                seen = seen | {text}
                hop = next_hop(method, url, status, raw.headers.get("Location"), body, seen=seen)
            if hop is None:
                response = Response(
                    status=status, headers=raw.headers, body=raw.body, url=text, method=method
                )
                return response, retry_after
            if hop.upgraded:  # upgraded from http to https: go there directly from now on
                self._origin = hop.url.with_path(self.base_url.raw_path, encoded=True)
            method, url, body = hop.method, hop.url, hop.body
            text = str(url)
        raise RedirectError(f"{method} {url}: more than {MAX_REDIRECTS} redirects")

    def _report(
        self,
        method: str,
        url: URL,
        status: int | None,
        elapsed: float,
        attempt: int,
        error: type[Exception] | None,
    ) -> None:
        debug = logger.isEnabledFor(logging.DEBUG)
        remaining = self.budget.snapshot().remaining
        failure = None if error is None else error.__name__
        if debug:
            logger.debug(
                "%s %s -> %s in %.1f ms (attempt %d, budget left %d)",
                method,
                url.path,
                status if status is not None else failure,
                elapsed * 1000,
                attempt,
                remaining,
            )
        if self.on_request is not None:
            self.on_request(
                RequestEvent(
                    method=method,
                    url=str(url),
                    status=status,
                    elapsed=elapsed,
                    attempt=attempt,
                    budget_remaining=remaining,
                    error=failure,
                )
            )


class BoundTransport:
    """A transport with fixed per-call settings: what the resources of one client send with."""

    def __init__(self, transport: HTTPTransport, options: CallOptions) -> None:
        self.transport = transport
        self.options = options
        self.fmt: Format = transport.fmt

    def request(
        self, method: str, path: str, *, body: bytes | None = None, idempotent: bool = False
    ) -> Coroutine[Any, Any, Response]:
        """The transport's `request` with these settings (its coroutine, not another)."""
        return self.transport.request(
            method, path, body=body, options=self.options, idempotent=idempotent
        )
