"""The one step that does I/O: send a prepared request, return status, headers and body.

`HTTPTransport` does everything else (auth, budget, retries, redirects, error mapping)
around a `Sender`; tests replace it with `invoicing_async.testing.MockSender`, as httpx's
`MockTransport`, to run operations in memory.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
from collections.abc import Mapping
from typing import Protocol

import aiohttp
import attrs
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from invoicing_async._transport.failures import connection_failure
from invoicing_async.errors import ResponseTooLargeError

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
    ) -> None:
        self._session = session
        self._owns_session = session is None
        self._ssl = ssl
        self._trace_configs = trace_configs

    def open(self) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(trace_configs=self._trace_configs)

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None and self._owns_session:
            await session.close()

    async def send(self, request: OutgoingRequest) -> RawResponse:
        self.open()
        assert self._session is not None
        try:
            async with self._session.request(
                request.method,
                request.url,
                data=request.body,
                headers=dict(request.headers),
                allow_redirects=False,
                timeout=request.timeout,
                ssl=self._ssl if self._ssl is not None else True,
            ) as resp:
                body = await _read_limited(resp, request)
                return RawResponse(status=resp.status, headers=resp.headers, body=body)
        except (asyncio.TimeoutError, aiohttp.ClientError) as exc:
            failure = connection_failure(exc, request.method, request.url, request.timeout)
        raise failure  # outside the except block: the aiohttp exception is not kept


async def _read_limited(resp: aiohttp.ClientResponse, request: OutgoingRequest) -> bytes:
    """The body, refusing to read past `max_response_bytes` (decompressed)."""
    limit = request.max_response_bytes
    where = f"{request.method} {request.url}"
    if resp.content_length is not None and resp.content_length > limit:
        raise ResponseTooLargeError(
            f"{where}: response of {resp.content_length} bytes exceeds max_response_bytes={limit}"
        )
    chunks: list[bytes] = []
    total = 0
    async for chunk in resp.content.iter_chunked(1 << 16):
        total += len(chunk)
        if total > limit:
            raise ResponseTooLargeError(
                f"{where}: response exceeds max_response_bytes={limit}; not read further"
            )
        chunks.append(chunk)
    return b"".join(chunks)
