"""`PushReceiver` mounted in web frameworks (aiohttp routes, a plain ASGI app); each only
moves the secret, content type, length and body to the receiver's checks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

import attrs
from aiohttp import web

__all__ = ["PushASGIApp", "PushResponse", "aiohttp_routes"]

SECRET_HEADER = "X-Push-Secret"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@attrs.frozen
class PushResponse:
    """What to answer a push: the status and a one-line text body."""

    status: int
    text: str


class PushChecks(Protocol):
    """What an adapter needs of the receiver: its framework-free checks (`PushReceiver`)."""

    async def receive(
        self,
        *,
        secrets_given: tuple[str | None, ...],
        content_type: str | None,
        content_length: int | None,
        read: Callable[[int], Awaitable[bytes]],
    ) -> PushResponse: ...


def aiohttp_routes(receiver: PushChecks, prefix: str = "/push") -> list[web.RouteDef]:
    """`POST {prefix}/{secret}` and `POST {prefix}` (secret in the header)."""

    async def handle(request: web.Request) -> web.Response:
        async def read(limit: int) -> bytes:
            return await _read_limited(request.content.read, limit)

        response = await receiver.receive(
            secrets_given=(request.match_info.get("secret"), request.headers.get(SECRET_HEADER)),
            content_type=request.headers.get("Content-Type"),
            content_length=request.content_length,
            read=read,
        )
        return web.Response(status=response.status, text=response.text)

    return [web.post(f"{prefix}/{{secret}}", handle), web.post(prefix, handle)]


async def _read_limited(read: Callable[[int], Awaitable[bytes]], limit: int) -> bytes:
    """Read until the end or until `limit` bytes, whichever comes first."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await read(limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


class PushASGIApp:
    """An ASGI app for `POST /` (secret in the header) and `POST /<secret>`; mount it under a
    prefix: ``app.mount("/push", receiver.asgi())``."""

    def __init__(self, receiver: PushChecks) -> None:
        self.receiver = receiver

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan and websockets: nothing to do
        if scope["method"] != "POST":
            await _answer(send, PushResponse(405, "method not allowed\n"))
            return
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in scope.get("headers", [])
        }
        path_secret = _last_segment(scope)
        length = headers.get("content-length")

        async def read(limit: int) -> bytes:
            return await _read_asgi_body(receive, limit)

        response = await self.receiver.receive(
            secrets_given=(path_secret, headers.get(SECRET_HEADER.lower())),
            content_type=headers.get("content-type"),
            content_length=int(length) if length is not None and length.isdigit() else None,
            read=read,
        )
        await _answer(send, response)


def _last_segment(scope: Scope) -> str | None:
    """The path below the mount point, when it is one segment (the secret)."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    segment = path.strip("/")
    return segment if segment and "/" not in segment else None


async def _read_asgi_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk: bytes = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)[:limit]


async def _answer(send: Send, response: PushResponse) -> None:
    body = response.text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": response.status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
