"""The one step that does I/O: send a prepared request, return status, headers and body
(tests replace it with `invoicing_async.testing.MockSender`)."""

from __future__ import annotations

import asyncio
import os
import ssl as ssl_module
from collections.abc import AsyncGenerator, Mapping
from typing import Protocol

import aiohttp
import attrs
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from invoicing_async._transport.failures import connection_failure
from invoicing_async._transport.proxies import NO_PROXY, Proxy, ProxySettings
from invoicing_async.errors import EventLoopError, ResponseTooLargeError

__all__ = ["AiohttpSender", "OutgoingRequest", "RawResponse", "Sender"]

DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024


@attrs.frozen
class OutgoingRequest:
    """A request ready to go: final URL, every header (Authorization included), body."""

    method: str
    url: URL
    headers: Mapping[str, str] = attrs.field(repr=False)
    body: bytes | None
    timeout: aiohttp.ClientTimeout
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES


@attrs.frozen
class RawResponse:
    """What came back, before any interpretation."""

    status: int
    headers: CIMultiDictProxy[str] | CIMultiDict[str]
    body: bytes


class Sender(Protocol):
    """Sends one request. Raises `SendError` when no response came back."""

    async def send(self, request: OutgoingRequest) -> RawResponse: ...

    def open(self) -> None:
        """Prepare for sending inside the running loop (a no-op for most senders)."""
        ...

    async def close(self) -> None: ...


class AiohttpSender:
    """Sends through an aiohttp session: its own (created on first use), or a borrowed one."""

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession | None = None,
        ssl: ssl_module.SSLContext | bool | None = None,
        trace_configs: list[aiohttp.TraceConfig] | None = None,
        trust_env: bool = True,
    ) -> None:
        self._session = session
        self._owns_session = session is None
        self._loop: asyncio.AbstractEventLoop | None = None  # where our own session lives
        self._keeper: AsyncGenerator[None, None] | None = None
        self._ssl = ssl
        self._trace_configs = trace_configs
        # Our own session takes the proxy of `HTTPS_PROXY`/`HTTP_PROXY` unless `NO_PROXY`
        # names the host; a borrowed session follows its own `trust_env`. The variables are
        # read now (a malformed one fails here, named); without any, no lookup at all.
        settings = ProxySettings.from_environ(os.environ) if trust_env and session is None else None
        self._proxy_settings = settings if settings else None
        self._proxies: dict[tuple[str, str | None, int | None], Proxy] = {}

    def _proxy_for(self, url: URL) -> Proxy:
        """The environment's proxy for `url`'s scheme, host and port, looked up once each."""
        key = (url.scheme, url.host, url.port)
        found = self._proxies.get(key)
        if found is None:
            assert self._proxy_settings is not None
            found = self._proxies[key] = self._proxy_settings.proxy_for(url)
        return found

    def open(self) -> None:
        loop = asyncio.get_running_loop()
        if self._session is None:
            self._session = aiohttp.ClientSession(trace_configs=self._trace_configs)
            # aiohttp sends a PUT again, unasked, when the connection drops before the
            # answer: a send or reminder the service applied would go twice. Our retry
            # policy decides what is repeated.
            self._session._retry_connection = False  # noqa: SLF001
        if self._loop is None:
            self._loop = loop  # the loop a borrowed session is first used on, or ours
            return
        opened_on = self._loop
        if opened_on is not loop:
            state = "closed" if opened_on.is_closed() else "still running"
            raise EventLoopError(
                f"this client's connections belong to another event loop ({state}); an "
                "aiohttp session cannot move between loops. Create the client inside the "
                "loop that uses it (for example inside the coroutine given to asyncio.run, "
                "as `async with InvoicingClient(...) as client:`), one per loop"
            )

    async def close(self) -> None:
        session, self._session = self._session, None
        keeper, self._keeper = self._keeper, None
        if session is None or not self._owns_session or session.closed:
            return
        if self._loop is not asyncio.get_running_loop():
            return  # its loop is gone; the keeper closed it when that loop shut down
        await session.close()
        if keeper is not None:
            await keeper.aclose()

    async def _keep(self) -> None:
        """Tie our session's life to its loop (see `_session_keeper`), once."""
        if self._keeper is None and self._owns_session and self._session is not None:
            keeper = self._keeper = _session_keeper(self._session)
            await keeper.__anext__()

    async def send(self, request: OutgoingRequest) -> RawResponse:
        self.open()
        if self._keeper is None:
            await self._keep()
        assert self._session is not None
        proxy, proxy_headers = (
            NO_PROXY if self._proxy_settings is None else self._proxy_for(request.url)
        )
        try:
            async with self._session.request(
                request.method,
                request.url,
                data=request.body,
                headers=request.headers,
                allow_redirects=False,
                timeout=request.timeout,
                ssl=self._ssl if self._ssl is not None else True,
                proxy=proxy,
                proxy_headers=proxy_headers,
            ) as resp:
                body = await _read_limited(resp, request)
                return RawResponse(status=resp.status, headers=resp.headers, body=body)
        except (asyncio.TimeoutError, aiohttp.ClientError) as exc:
            failure = connection_failure(exc, request.method, request.url, request.timeout)
        raise failure  # outside the except block: the aiohttp exception is not kept


async def _session_keeper(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    """An async generator that closes `session` on its own loop when finalized (a client
    dropped without `aclose()`, or `asyncio.run` shutting down)."""
    try:
        yield
    finally:
        if not session.closed:
            await session.close()


#: Bodies larger than this are joined from their chunks in a thread, off the event loop.
JOIN_OFF_LOOP_BYTES = 1 << 20


async def _read_limited(resp: aiohttp.ClientResponse, request: OutgoingRequest) -> bytes:
    """The body, refusing to read past `max_response_bytes` (decompressed)."""
    limit = request.max_response_bytes
    length = resp.content_length  # parsed from the header on each access
    if length is not None and length > limit:
        raise ResponseTooLargeError(
            f"{request.method} {request.url}: response of {length} bytes "
            f"exceeds max_response_bytes={limit}"
        )
    if (
        length is not None
        and length <= JOIN_OFF_LOOP_BYTES
        and not resp.headers.get("Content-Encoding")
    ):
        # Not compressed: the body is the `length` bytes checked above, read at once.
        return await resp.read()
    chunks: list[bytes] = []
    total = 0
    async for chunk in resp.content.iter_chunked(1 << 16):
        total += len(chunk)
        if total > limit:
            raise ResponseTooLargeError(
                f"{request.method} {request.url}: response exceeds "
                f"max_response_bytes={limit}; not read further"
            )
        chunks.append(chunk)
    if total > JOIN_OFF_LOOP_BYTES:
        # Joining 30 MB touches fresh pages for ~10-60 ms; bytes.join lets go of the GIL
        # for large joins, so in a thread the event loop goes on meanwhile.
        return await asyncio.to_thread(b"".join, chunks)
    return b"".join(chunks)
