"""The receiver of the service's push notifications (form POST `invoice_id`, `state`), and
its adapters for aiohttp and ASGI; the push guide tells how the secret and the ids go."""

from __future__ import annotations

import asyncio
import itertools
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import attrs
from aiohttp import web

from invoicing_async._sync.engine import SyncEngine
from invoicing_async._sync.report import SyncReport
from invoicing_async._text import package_logger

__all__ = ["PushASGIApp", "PushReceiver", "PushResponse", "follow_pushes"]

logger = package_logger("invoicing_async.push")

FORM = "application/x-www-form-urlencoded"
SECRET_HEADER = "X-Push-Secret"
# ASCII digits only: int() would also take "٤٢", "4_2" or " 42", none of which the
# service sends. 18 digits keep every id below 2**63.
_INVOICE_ID = re.compile(r"[0-9]{1,18}")
_STATE = re.compile(r"[A-Za-z0-9_-]{1,64}")


@attrs.frozen
class PushResponse:
    """What to answer a push: the status and a one-line text body."""

    status: int
    text: str


_OK = PushResponse(200, "ok\n")
_FORBIDDEN = PushResponse(403, "forbidden\n")
_NOT_FORM = PushResponse(415, "expected a form body\n")
_TOO_LARGE = PushResponse(413, "body too large\n")
_MALFORMED = PushResponse(400, "expected invoice_id and state\n")
_BAD_VALUE = PushResponse(400, "bad invoice_id or state\n")
_FULL = PushResponse(503, "too many pending pushes\n")


class PushReceiver:
    """Collects pushed invoice ids until they are stored; any web framework can feed it.

    Mount it with ``app.add_routes(receiver.routes())`` (aiohttp) or
    ``app.mount("/push", receiver.asgi())`` (Starlette, FastAPI), and give the service the
    URL ``https://your.host/push/<secret>``, or send the secret as `X-Push-Secret`.
    """

    def __init__(
        self,
        secret: str,
        *,
        max_body: int = 4096,
        max_pending: int = 100_000,
        on_push: Callable[[int, str], None] | None = None,
    ) -> None:
        if len(secret) < 16:
            raise ValueError("use a secret of at least 16 characters (secrets.token_urlsafe())")
        self._secret = secret.encode()
        self.max_body = max_body
        self.max_pending = max_pending
        self.on_push = on_push
        self._pending: dict[int, tuple[str, int]] = {}  # id -> (last state, arrival number)
        self._arrivals = itertools.count(1)
        self._arrived = asyncio.Event()
        self.accepted = 0
        self.rejected = 0
        self.coalesced = 0

    def __repr__(self) -> str:
        return f"PushReceiver(pending={len(self._pending)}, secret='***')"

    def authorized(self, *candidates: str | None) -> bool:
        """True when one of the given strings is our secret (constant time; non-UTF-8 header
        bytes are simply not the secret)."""
        found = False
        for given in candidates:
            if given is not None:
                found |= secrets.compare_digest(
                    given.encode("utf-8", "surrogatepass"), self._secret
                )
        return found

    async def receive(
        self,
        *,
        secrets_given: tuple[str | None, ...],
        content_type: str | None,
        content_length: int | None,
        read: Callable[[int], Awaitable[bytes]],
    ) -> PushResponse:
        """Check one push and take its id; the body (`read(n)`) is read only after the secret,
        type and declared length passed."""
        if not self.authorized(*secrets_given):
            return self._reject(_FORBIDDEN)
        if (content_type or "").split(";", 1)[0].strip().lower() != FORM:
            return self._reject(_NOT_FORM)
        if content_length is not None and content_length > self.max_body:
            return self._reject(_TOO_LARGE)
        raw = await read(self.max_body + 1)
        if len(raw) > self.max_body:
            return self._reject(_TOO_LARGE)
        return self.receive_form(raw)

    def receive_form(self, raw: bytes) -> PushResponse:
        """Parse a form body that passed the checks of `receive` and take its id."""
        try:
            form = parse_qs(raw.decode("utf-8"), strict_parsing=True, max_num_fields=10)
            (raw_id,), (state,) = form["invoice_id"], form["state"]
        except (KeyError, ValueError, UnicodeDecodeError):
            return self._reject(_MALFORMED)
        if not _INVOICE_ID.fullmatch(raw_id) or not _STATE.fullmatch(state):
            return self._reject(_BAD_VALUE)
        invoice_id = int(raw_id)
        if invoice_id <= 0:
            return self._reject(_BAD_VALUE)
        if invoice_id in self._pending:
            self.coalesced += 1
        elif len(self._pending) >= self.max_pending:
            return self._reject(_FULL)
        self._pending[invoice_id] = (state, next(self._arrivals))
        self.accepted += 1
        self._arrived.set()
        if self.on_push is not None:
            self.on_push(invoice_id, state)
        return _OK

    def _reject(self, response: PushResponse) -> PushResponse:
        self.rejected += 1
        return response

    def routes(self, prefix: str = "/push") -> list[web.RouteDef]:
        """aiohttp routes: `POST {prefix}/{secret}`, and `POST {prefix}` with the header."""

        async def handle(request: web.Request) -> web.Response:
            async def read(limit: int) -> bytes:
                return await _read_limited(request.content.read, limit)

            try:
                response = await self.receive(
                    secrets_given=(
                        request.match_info.get("secret"),
                        request.headers.get(SECRET_HEADER),
                    ),
                    content_type=request.headers.get("Content-Type"),
                    content_length=request.content_length,
                    read=read,
                )
            except (ConnectionError, aiohttp.ClientPayloadError) as exc:
                # The sender went away mid-body: nothing taken, nobody left to answer.
                logger.debug("push cut off mid-body: %s", type(exc).__name__)
                return web.Response(status=400, text="body cut off")
            return web.Response(status=response.status, text=response.text)

        return [web.post(f"{prefix}/{{secret}}", handle), web.post(prefix, handle)]

    def asgi(self) -> Callable[..., Awaitable[None]]:
        """A plain ASGI app to mount in Starlette or FastAPI (`app.mount("/push", …)`)."""
        return PushASGIApp(self)

    @property
    def pending(self) -> dict[int, str]:
        """Pushed ids not yet stored, with the last state pushed for each."""
        return {ident: state for ident, (state, _) in self._pending.items()}

    def claim(self) -> Mapping[int, int]:
        """The pending ids with their arrival numbers, left pending until `settle`."""
        self._arrived.clear()
        return {ident: arrival for ident, (_, arrival) in self._pending.items()}

    def settle(self, claimed: Mapping[int, int]) -> None:
        """Forget claimed ids that are stored now, unless pushed again since the claim."""
        for ident, arrival in claimed.items():
            entry = self._pending.get(ident)
            if entry is not None and entry[1] == arrival:
                del self._pending[ident]
        if self._pending:
            self._arrived.set()

    def take(self) -> list[int]:
        """The pushed ids (each once), emptying the receiver: for callers that store them."""
        ids = list(self._pending)
        self._pending.clear()
        self._arrived.clear()
        return ids

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until something was pushed; False on timeout."""
        try:
            await asyncio.wait_for(self._arrived.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True


async def follow_pushes(
    engine: SyncEngine,
    receiver: PushReceiver,
    *,
    interval: float = 5.0,
    stop: asyncio.Event | None = None,
) -> list[SyncReport]:
    """Fetch what is pushed, at most once per `interval` seconds, until `stop` is set (N
    pushes cost ceil(N/100) requests; a failed fetch leaves its ids for the next round)."""
    reports: list[SyncReport] = []
    stop = stop or asyncio.Event()
    while not stop.is_set():
        if not await receiver.wait(timeout=interval):
            continue
        await asyncio.sleep(interval)  # let the burst of pushes arrive
        claimed = receiver.claim()
        if not claimed:
            continue
        try:
            report = await engine.fetch(list(claimed))
        except Exception as exc:  # whatever failed, the ids stay for the next round
            logger.warning("fetching %d pushed invoices failed: %s", len(claimed), exc)
            receiver.settle({})
            continue
        unstored = set(report.pending)
        receiver.settle({i: n for i, n in claimed.items() if i not in unstored})
        logger.info(
            "fetched %d pushed invoices in %d requests (%d left for later)",
            len(claimed) - len(unstored),
            report.requests,
            len(unstored),
        )
        reports.append(report)
    return reports


# -- the receiver mounted in web frameworks: each adapter only moves the secret, content
# type, length and body to `PushReceiver.receive`.

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


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

    def __init__(self, receiver: PushReceiver) -> None:
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
