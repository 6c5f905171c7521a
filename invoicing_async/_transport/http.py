"""The session wrapper every request goes through: URL rules, auth, budget, retries,
redirects, size limits, logging. The decisions themselves live in pure modules
(`response`, `retry`, `budget`); this one does the I/O.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl as ssl_module
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import attrs
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from invoicing_async._models.documents import Format
from invoicing_async._transport.auth import Auth
from invoicing_async._transport.budget import RateBudget
from invoicing_async._transport.response import Response, error_for, is_budget_refusal, rate_headers
from invoicing_async._transport.retry import RETRY_STATUSES, RetryPolicy
from invoicing_async._version import __version__
from invoicing_async.errors import (
    APIConnectionError,
    APITimeoutError,
    ClientClosedError,
    InsecureTransportError,
    RedirectError,
    ResponseTooLargeError,
)

__all__ = ["HTTPTransport", "RequestEvent", "is_loopback", "validate_base_url"]

logger = logging.getLogger("invoicing_async")

CONTENT_TYPES: dict[str, str] = {"xml": "application/xml", "json": "application/json"}
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024


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


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def validate_base_url(base_url: str | URL) -> URL:
    """The account's host as a URL; refuses http (but for loopback) and embedded credentials."""
    url = URL(base_url)
    if url.scheme not in ("https", "http") or not url.host:
        raise ValueError(f"base URL must be an https:// address of the account's host: {url}")
    if url.user is not None or url.password is not None:
        raise ValueError("put credentials in auth=, not in the base URL")
    if url.scheme == "http" and not is_loopback(url.host):
        raise InsecureTransportError(
            f"refusing plain http to {url.host}: credentials would travel in clear text; "
            "use https:// (plain http is allowed only for loopback test servers)"
        )
    return url.with_query(None).with_fragment(None)


class _SendFailure(Exception):
    def __init__(self, error: APIConnectionError, *, connected: bool) -> None:
        self.error = error
        self.connected = connected


class HTTPTransport:
    """Sends requests to one account's API; owns (or borrows) an aiohttp session."""

    def __init__(
        self,
        base_url: str | URL,
        *,
        auth: Auth,
        fmt: Format,
        budget: RateBudget,
        retry: RetryPolicy,
        timeout: aiohttp.ClientTimeout,
        max_wait: float | None,
        api_prefix: str = "/api/v1.0",
        session: aiohttp.ClientSession | None = None,
        ssl: ssl_module.SSLContext | bool | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        user_agent: str | None = None,
        on_request: Callable[[RequestEvent], None] | None = None,
        trace_configs: list[aiohttp.TraceConfig] | None = None,
    ) -> None:
        if fmt not in CONTENT_TYPES:
            raise ValueError(f"format must be 'xml' or 'json', not {fmt!r}")
        self.base_url = validate_base_url(base_url)
        self.auth = auth
        self.fmt = fmt
        self.budget = budget
        self.retry = retry
        self.timeout = timeout
        self.max_wait = max_wait
        self.api_prefix = "/" + api_prefix.strip("/") if api_prefix.strip("/") else ""
        self.max_response_bytes = max_response_bytes
        self.user_agent = (
            user_agent or f"invoicing-async/{__version__} aiohttp/{aiohttp.__version__}"
        )
        self.on_request = on_request
        self._ssl = ssl
        self._trace_configs = trace_configs
        self._session = session
        self._owns_session = session is None
        self._closed = False
        self.requests_sent = 0  # every HTTP request, retries and redirects included
        # After the service upgraded us from http to https, go there directly.
        self._upgraded_origin: URL | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        """True once `close()` ran: the transport sends nothing more."""
        return self._closed

    def open(self) -> None:
        """Create the aiohttp session now (inside the running loop) if there is none yet."""
        self._get_session()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise ClientClosedError(
                "this client is closed: create a new InvoicingClient "
                "(or use this one inside its `async with` block)"
            )
        if self._session is None:
            self._session = aiohttp.ClientSession(trace_configs=self._trace_configs)
        return self._session

    async def close(self) -> None:
        """Close the session if this transport created it; a borrowed one is left open."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None and self._owns_session:
            await session.close()

    # -- URLs ----------------------------------------------------------------------------

    def url_for(self, path: str) -> URL:
        """`/invoices.xml` -> `https://host/api/v1.0/invoices.xml` (path already escaped)."""
        origin = self._upgraded_origin or self.base_url
        base_path = origin.raw_path.rstrip("/")
        return origin.with_path(f"{base_path}{self.api_prefix}{path}", encoded=True)

    # -- requests --------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
    ) -> Response:
        """Send one API call with retries; returns the 2xx response or raises its error."""
        policy = self.retry
        wait_budget = self.max_wait
        loop = asyncio.get_running_loop()
        started = loop.time()
        attempt = 0
        while True:
            attempt += 1
            url = self.url_for(path)
            try:
                response, retry_after = await self._send(method, url, body, attempt, wait_budget)
            except _SendFailure as failure:
                if self._may_retry(attempt, started, loop) and policy.retries_error(
                    method, connected=failure.connected
                ):
                    await self._backoff(method, url, attempt, None, str(failure.error))
                    continue
                raise failure.error from failure.error.__cause__
            if (
                response.status in RETRY_STATUSES
                and policy.retries_status(method, response.status)
                and self._may_retry(attempt, started, loop)
            ):
                after = _retry_after(response.headers)
                await self._backoff(method, url, attempt, after, f"status {response.status}")
                continue
            error = error_for(
                response.status,
                response.headers,
                response.body,
                fmt=self.fmt,
                method=method,
                url=str(response.url),
                retry_after=retry_after,
            )
            if error is not None:
                raise error
            return response

    def _may_retry(self, attempt: int, started: float, loop: asyncio.AbstractEventLoop) -> bool:
        return attempt < self.retry.attempts and loop.time() - started < self.retry.max_total

    async def _backoff(
        self, method: str, url: URL, attempt: int, retry_after: float | None, why: str
    ) -> None:
        delay = self.retry.delay(attempt, retry_after)
        logger.info(
            "%s %s failed (%s); retry %d/%d in %.2fs",
            method,
            url.path,
            why,
            attempt,
            self.retry.attempts - 1,
            delay,
        )
        await asyncio.sleep(delay)

    async def _send(
        self, method: str, url: URL, body: bytes | None, attempt: int, max_wait: float | None
    ) -> tuple[Response, float | None]:
        """One request, following the service's http->https redirect on the same host."""
        seen = {str(url)}
        for _ in range(MAX_REDIRECTS + 1):
            response, retry_after = await self._send_once(method, url, body, attempt, max_wait)
            location = response.headers.get("Location")
            if response.status not in REDIRECT_STATUSES or not location:
                return response, retry_after
            target = url.join(URL(location))
            if (target.host or "").lower() != (url.host or "").lower():
                raise RedirectError(
                    f"{method} {url} redirected to another host ({target.host}); "
                    "not followed, so credentials stay with the account's host"
                )
            if url.scheme == "https" and target.scheme != "https":
                raise RedirectError(f"{method} {url} redirected to insecure {target}; not followed")
            if str(target) in seen:
                raise RedirectError(f"{method} {url}: redirect loop at {target}")
            seen.add(str(target))
            if url.scheme == "http" and target.scheme == "https":
                self._upgraded_origin = target.with_path(self.base_url.raw_path, encoded=True)
            url = target
        raise RedirectError(f"{method} {url}: more than {MAX_REDIRECTS} redirects")

    async def _send_once(
        self, method: str, url: URL, body: bytes | None, attempt: int, max_wait: float | None
    ) -> tuple[Response, float | None]:
        session = self._get_session()
        seq = await self.budget.acquire(max_wait=max_wait)
        self.requests_sent += 1
        content_type = CONTENT_TYPES[self.fmt] if body is not None else None
        headers = {
            "Accept": CONTENT_TYPES[self.fmt],
            "User-Agent": self.user_agent,
        }
        if content_type is not None:
            headers["Content-Type"] = content_type
        headers.update(self.auth.headers_for(method, str(url), body, content_type))
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with session.request(
                method,
                url,
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=self.timeout,
                ssl=self._ssl if self._ssl is not None else True,
            ) as resp:
                payload = await self._read_body(resp, method, url)
                status, resp_headers = resp.status, resp.headers
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as exc:
            connected = not isinstance(exc, aiohttp.ConnectionTimeoutError)
            self._report(method, url, None, loop.time() - started, attempt, "timeout")
            error: APIConnectionError = APITimeoutError(
                f"{method} {url} timed out ({_timeout_text(self.timeout)})",
                method=method,
                url=str(url),
            )
            error.__cause__ = exc
            raise _SendFailure(error, connected=connected) from exc
        except aiohttp.ClientConnectorCertificateError as exc:
            self._report(method, url, None, loop.time() - started, attempt, "certificate")
            error = APIConnectionError(
                f"{method} {url}: TLS certificate not trusted: {exc.certificate_error}",
                method=method,
                url=str(url),
            )
            error.__cause__ = exc
            # Retrying cannot fix a certificate; mark it connected so nothing retries POST.
            raise _SendFailure(error, connected=True) from exc
        except aiohttp.ClientError as exc:
            connected = not isinstance(exc, aiohttp.ClientConnectorError)
            self._report(method, url, None, loop.time() - started, attempt, type(exc).__name__)
            error = APIConnectionError(
                f"{method} {url}: connection failed: {exc.__class__.__name__}: {exc}",
                method=method,
                url=str(url),
            )
            error.__cause__ = exc
            raise _SendFailure(error, connected=connected) from exc
        rates = rate_headers(resp_headers)
        self.budget.observe(seq, limit=rates.limit, remaining=rates.remaining)
        retry_after = None
        if is_budget_refusal(status, resp_headers, payload):
            retry_after = self.budget.exhausted(seq)
        self._report(method, url, status, loop.time() - started, attempt, None)
        return (
            Response(
                status=status, headers=resp_headers, body=payload, url=str(url), method=method
            ),
            retry_after,
        )

    async def _read_body(self, resp: aiohttp.ClientResponse, method: str, url: URL) -> bytes:
        limit = self.max_response_bytes
        if resp.content_length is not None and resp.content_length > limit:
            raise ResponseTooLargeError(
                f"{method} {url}: response of {resp.content_length} bytes exceeds "
                f"max_response_bytes={limit}"
            )
        chunks: list[bytes] = []
        total = 0
        async for chunk in resp.content.iter_chunked(1 << 16):
            total += len(chunk)
            if total > limit:
                raise ResponseTooLargeError(
                    f"{method} {url}: response exceeds max_response_bytes={limit}; not read further"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _report(
        self,
        method: str,
        url: URL,
        status: int | None,
        elapsed: float,
        attempt: int,
        error: str | None,
    ) -> None:
        remaining = self.budget.snapshot().remaining
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "%s %s -> %s in %.1f ms (attempt %d, budget left %d)",
                method,
                url.path,
                status if status is not None else error,
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
                    error=error,
                )
            )


def _timeout_text(timeout: aiohttp.ClientTimeout) -> str:
    parts = []
    if timeout.connect is not None:
        parts.append(f"connect {timeout.connect:g}s")
    if timeout.total is not None:
        parts.append(f"total {timeout.total:g}s")
    return ", ".join(parts) or "no timeout set"


def _retry_after(
    headers: CIMultiDictProxy[str] | CIMultiDict[str] | Mapping[str, Any],
) -> float | None:
    raw = headers.get("Retry-After")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None
