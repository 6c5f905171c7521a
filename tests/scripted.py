"""The scripted API: answers what a test scripts and records what it got.

The one double of the API beside the fake service (whole behaviour) and `MockSender`
(a function per request). Used instead of aioresponses (which fails on aiohttp 3.14). In
memory by default, through `MockSender`: everything but the I/O (auth, budget, retries,
redirects, error mapping, decoding) runs for real. Entered (`async with`), it also serves on
loopback, so requests go through the real aiohttp client stack, sockets included.
"""

from __future__ import annotations

import asyncio
import inspect
import ssl
from collections.abc import Awaitable, Callable

import attrs
from aiohttp import web

import invoicing_async as ia
from invoicing_async.testing import MockSender, OutgoingRequest, RawResponse, mock_response
from invoicing_async.testing._service import loopback_tls

__all__ = ["BASE_URL", "Reply", "Script", "ScriptedAPI", "Seen", "scripted_client"]

BASE_URL = "https://acme.example.com"  # where the in-memory API "is"

Reply = tuple[int, bytes, dict[str, str]]


@attrs.frozen
class Seen:
    """A request as the API got it."""

    method: str
    url: str
    path: str  # decoded, as a server's router sees it
    raw_path: str  # as sent, escapes kept
    query: str
    headers: dict[str, str]
    body: bytes


Script = Callable[[Seen], Awaitable[Reply] | Reply]


class ScriptedAPI:
    """Answers each request with the next reply scripted for its (method, decoded path),
    else its route; 404 when neither is left."""

    def __init__(self, *, tls: bool = False) -> None:
        self.tls = tls
        self.client_ssl: ssl.SSLContext | None = None
        self.seen: list[Seen] = []
        self.sender = MockSender(self._answer_outgoing)
        # Set when the loopback server closes: a script that waits for it answers after
        # every client gave up (a reply that comes too late), without a wall-clock sleep.
        self.closing = asyncio.Event()
        self._replies: dict[tuple[str, str], list[Reply | Script]] = {}
        self._routes: dict[tuple[str, str], Script] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """The loopback URL once entered, else the in-memory API's."""
        if self._runner is None:
            return BASE_URL
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def reply(
        self,
        method: str,
        path: str,
        status: int = 200,
        body: bytes | str = b"",
        headers: dict[str, str] | None = None,
        *,
        times: int = 1,
    ) -> None:
        raw = body.encode() if isinstance(body, str) else body
        for _ in range(times):
            self._replies.setdefault((method, path), []).append((status, raw, headers or {}))

    def script(self, method: str, path: str, fn: Script, *, times: int = 1) -> None:
        """Answer with `fn(seen)` (sync or async) instead of a fixed reply."""
        for _ in range(times):
            self._replies.setdefault((method, path), []).append(fn)

    def route(self, method: str, path: str, fn: Script) -> None:
        """Answer every request to (method, path) with `fn(seen)` once its scripted replies
        are used up (an endpoint that keeps answering, such as an account's)."""
        self._routes[(method, path)] = fn

    async def _answer(self, seen: Seen) -> Reply:
        self.seen.append(seen)
        key = (seen.method, seen.path)
        queue = self._replies.get(key)
        entry = queue.pop(0) if queue else self._routes.get(key, (404, b"no script", {}))
        if callable(entry):
            result = entry(seen)
            return await result if inspect.isawaitable(result) else result
        return entry

    async def _answer_outgoing(self, request: OutgoingRequest) -> RawResponse:
        url = request.url
        status, body, headers = await self._answer(
            Seen(
                method=request.method,
                url=str(url),
                path=url.path,
                raw_path=url.raw_path,
                query=url.query_string,
                headers=dict(request.headers),
                body=request.body or b"",
            )
        )
        return mock_response(status, body, headers)

    async def _answer_http(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        status, payload, headers = await self._answer(
            Seen(
                method=request.method,
                url=str(request.url),
                path=request.path,
                raw_path=request.rel_url.raw_path,
                query=request.query_string,
                headers=dict(request.headers),
                body=body,
            )
        )
        return web.Response(status=status, body=payload, headers=headers)

    async def __aenter__(self) -> ScriptedAPI:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._answer_http)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        server_ssl = None
        if self.tls:
            _, server_ssl, self.client_ssl = loopback_tls()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=server_ssl)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        self.closing.set()
        await self._runner.cleanup()


def scripted_client(api: ScriptedAPI, fmt: str = "xml", **kwargs: object) -> ia.InvoicingClient:
    """A client of the scripted API (on loopback when it serves, else in memory) with no
    retry sleeps and a budget that never binds."""
    kwargs.setdefault("budget", ia.RateBudget(limit=100_000))
    kwargs.setdefault("retry", ia.RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0))
    kwargs.setdefault("auth", ia.BasicAuth("api-user", "s3cret-pw"))
    if api.url == BASE_URL:
        kwargs.setdefault("sender", api.sender)
    return ia.InvoicingClient(
        api.url,
        format=fmt,  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )
