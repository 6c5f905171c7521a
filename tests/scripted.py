"""A loopback HTTP server that answers what a test scripts and records what it got.

Used instead of aioresponses (which fails on aiohttp 3.14): requests go through the
real aiohttp client stack, sockets included.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trustme
from aiohttp import web

import invoicing_async as ia

Reply = tuple[int, bytes, dict[str, str]]
Script = Callable[[web.Request, bytes], Awaitable[Reply | None] | Reply | None]


@attrs.frozen
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


class ScriptedServer:
    """Answers each request with the next scripted reply for its (method, path)."""

    def __init__(self, *, tls: bool = False) -> None:
        self.tls = tls
        self.client_ssl: ssl.SSLContext | None = None
        self.seen: list[Seen] = []
        self._replies: dict[tuple[str, str], list[Reply | Script]] = {}
        self._default: Reply = (404, b"no script", {})
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
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
        for _ in range(times):
            self._replies.setdefault((method, path), []).append(fn)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(
            Seen(
                method=request.method,
                path=request.path,
                query=request.query_string,
                headers=dict(request.headers),
                body=body,
            )
        )
        queue = self._replies.get((request.method, request.path))
        entry: Any = queue.pop(0) if queue else self._default
        if callable(entry):
            result = entry(request, body)
            if hasattr(result, "__await__"):
                result = await result
            entry = result
            if entry is None:
                raise web.HTTPInternalServerError()
        status, payload, headers = entry
        return web.Response(status=status, body=payload, headers=headers)

    async def __aenter__(self) -> ScriptedServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        server_ssl = None
        if self.tls:
            ca = trustme.CA()
            server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ca.issue_cert("127.0.0.1").configure_cert(server_ssl)
            self.client_ssl = ssl.create_default_context()
            ca.configure_trust(self.client_ssl)
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=server_ssl)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


def scripted_client(
    server: ScriptedServer, fmt: str = "xml", **kwargs: object
) -> ia.InvoicingClient:
    """A client of the scripted server with no retry sleeps and a budget that never binds."""
    kwargs.setdefault("budget", ia.RateBudget(limit=100_000))
    kwargs.setdefault("retry", ia.RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0))
    kwargs.setdefault("auth", ia.BasicAuth("api-user", "s3cret-pw"))
    return ia.InvoicingClient(
        server.url,
        format=fmt,  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )
