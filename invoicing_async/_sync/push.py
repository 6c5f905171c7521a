"""The receiver of the service's push notifications (form POST `invoice_id`, `state`).

The service signs nothing, so the receiver requires a secret of ours: in the receiver
URL's path (`/push/{secret}`) or an `X-Push-Secret` header; anything else gets 403.
Pushed ids are de-duplicated and handed to the sync engine in batches, never one
request per push.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from urllib.parse import parse_qs

from aiohttp import web

from invoicing_async._sync.engine import SyncEngine, SyncReport

__all__ = ["PushReceiver", "follow_pushes"]

logger = logging.getLogger("invoicing_async.push")

FORM = "application/x-www-form-urlencoded"
MAX_STATE_CHARS = 64


class PushReceiver:
    """An aiohttp handler that collects pushed invoice ids until the engine takes them.

    Mount it with ``app.add_routes(receiver.routes())`` and give the service the URL
    ``https://your.host/push/<secret>``.
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
        self._secret = secret
        self.max_body = max_body
        self.max_pending = max_pending
        self.on_push = on_push
        self._pending: dict[int, str] = {}
        self._arrived = asyncio.Event()
        self.accepted = 0
        self.rejected = 0
        self.coalesced = 0

    def __repr__(self) -> str:
        return f"PushReceiver(pending={len(self._pending)}, secret='***')"

    def routes(self, prefix: str = "/push") -> list[web.RouteDef]:
        """`POST {prefix}/{secret}`, and `POST {prefix}` with the `X-Push-Secret` header."""
        return [web.post(f"{prefix}/{{secret}}", self.handle), web.post(prefix, self.handle)]

    def _authorized(self, request: web.Request) -> bool:
        given = request.match_info.get("secret") or request.headers.get("X-Push-Secret") or ""
        return secrets.compare_digest(given.encode(), self._secret.encode())

    async def handle(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            self.rejected += 1
            return web.Response(status=403, text="forbidden\n")
        if request.content_type != FORM:
            self.rejected += 1
            return web.Response(status=415, text="expected a form body\n")
        if request.content_length is not None and request.content_length > self.max_body:
            self.rejected += 1
            return web.Response(status=413, text="body too large\n")
        raw = await request.content.read(self.max_body + 1)
        if len(raw) > self.max_body:
            self.rejected += 1
            return web.Response(status=413, text="body too large\n")
        try:
            form = parse_qs(raw.decode("utf-8"), strict_parsing=True, max_num_fields=10)
            invoice_id = int(form["invoice_id"][0])
            state = form["state"][0]
        except (KeyError, ValueError, UnicodeDecodeError, IndexError):
            self.rejected += 1
            return web.Response(status=400, text="expected invoice_id and state\n")
        if invoice_id <= 0 or not state or len(state) > MAX_STATE_CHARS:
            self.rejected += 1
            return web.Response(status=400, text="bad invoice_id or state\n")
        if invoice_id in self._pending:
            self.coalesced += 1
        elif len(self._pending) >= self.max_pending:
            self.rejected += 1
            return web.Response(status=503, text="too many pending pushes\n")
        self._pending[invoice_id] = state
        self.accepted += 1
        self._arrived.set()
        if self.on_push is not None:
            self.on_push(invoice_id, state)
        return web.Response(text="ok\n")

    @property
    def pending(self) -> dict[int, str]:
        """Pushed ids not yet taken, with the last state pushed for each."""
        return dict(self._pending)

    def take(self) -> list[int]:
        """The pushed ids (each once), emptying the receiver."""
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
    """Fetch what is pushed, at most once per `interval` seconds, until `stop` is set.

    Pushes arriving within an interval are coalesced: N pushes cost ceil(N/100) requests.
    """
    reports: list[SyncReport] = []
    stop = stop or asyncio.Event()
    while not stop.is_set():
        if not await receiver.wait(timeout=interval):
            continue
        await asyncio.sleep(interval)  # let the burst of pushes arrive
        ids = receiver.take()
        if ids:
            report = await engine.fetch(ids)
            logger.info("fetched %d pushed invoices in %d requests", len(ids), report.requests)
            reports.append(report)
    return reports
