"""How the fake service sends a body: whole, streamed in pieces, or cut short (a fault)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import attrs
from aiohttp import web

from invoicing_async._models.documents import Format

__all__ = ["Body", "Streamed", "content_type", "streamed", "truncated"]


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
