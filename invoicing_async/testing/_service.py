"""`FakeInvoicingService`: a real HTTP(S) server on loopback that behaves like the service."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import aiohttp
import trustme
from aiohttp import web

from invoicing_async._blocking import BlockingInvoicingClient
from invoicing_async._budget.budget import RateBudget
from invoicing_async._client import InvoicingClient
from invoicing_async._transport.auth import Auth, BasicAuth, OAuth1Auth
from invoicing_async.testing._account import Account, PushEvent
from invoicing_async.testing._app import build_app, redirect_app
from invoicing_async.testing._clock import FakeClock
from invoicing_async.testing._documents import DocumentAllowance
from invoicing_async.testing._generator import populate
from invoicing_async.testing._oauth import OAuth1Verifier
from invoicing_async.testing._ratelimit import WindowRule

__all__ = ["FakeInvoicingService"]

logger = logging.getLogger("invoicing_async.testing")

# Seconds `serve_in_thread` waits for the service to start or stop, and its thread to end.
_THREAD_PATIENCE = 30.0


@functools.cache
def loopback_tls() -> tuple[trustme.CA, ssl.SSLContext, ssl.SSLContext]:
    """The throwaway CA, a server context for the loopback names and a client context
    trusting it: made once per process (it costs more than starting a server)."""
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost", "::1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return ca, server, client


class FakeInvoicingService:
    """The Invoicing Service API v1.0 on loopback, for tests, the demo and benchmarks.

    Serves HTTPS with a certificate from a throwaway CA (`ssl_context` trusts it), plus a
    plain-http listener that answers 302 to the https address, as the real service did
    (`tls=False`: plain http only). Accounts are told apart by their credentials; with
    `port_per_account`, each also listens on a port of its own (`base_url_for`) and is
    refused (401) on any other. `oauth1=True` also accepts OAuth 1.0a signed requests
    (`oauth1_auth` holds the default account's). Invoices come in the real service's
    shape, with the fields it sent beyond the specification (`tax_components`, `sent_at`,
    `tax` on lines…; field notes); `real_shape=False` sends the specified fields only."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = True,
        redirect_listener: bool = True,
        username: str = "api-user",
        password: str | None = None,
        invoices: int = 0,
        seed: int = 0,
        limit: int = 350,
        period: float = 3600.0,
        window_rule: WindowRule = "fixed",
        clock: FakeClock | None = None,
        port_per_account: bool = False,
        oauth1: bool = False,
        real_shape: bool = True,
    ) -> None:
        self.host = host
        self.real_shape = real_shape
        self.oauth1 = OAuth1Verifier() if oauth1 else None
        self.port_per_account = port_per_account
        self._ports: dict[str, int] = {}  # username -> its own port (port_per_account)
        self.port = port
        self.tls = tls
        self.redirect_listener = redirect_listener and tls
        self.clock = clock or FakeClock()
        self.limit = limit
        self.period = period
        self.window_rule: WindowRule = window_rule
        self.accounts: dict[str, Account] = {}
        # Encoded invoices kept for the next response, all accounts together.
        self.documents = DocumentAllowance()
        self.unauthorized = 0
        self.account = self.add_account(
            "default", username=username, password=password or secrets.token_urlsafe(16)
        )
        if invoices:
            populate(self.account, invoices, seed=seed)
        self._runner: web.AppRunner | None = None
        self._redirect_runner: web.AppRunner | None = None
        self._push_session: aiohttp.ClientSession | None = None
        self._push_tasks: set[asyncio.Task[None]] = set()
        self._ca: Any = None
        self._client_ssl: ssl.SSLContext | None = None
        self._https_port = 0
        self._http_port = 0
        self.push_deliveries: list[tuple[str, PushEvent, int | None]] = []

    def add_account(
        self,
        name: str,
        *,
        username: str | None = None,
        password: str | None = None,
        limit: int | None = None,
        push_url: str | None = None,
    ) -> Account:
        """Another account on the same server, with its own data and its own budget."""
        if self.port_per_account and getattr(self, "_runner", None) is not None:
            raise RuntimeError("with port_per_account, add accounts before the service starts")
        account = Account(
            name,
            username=username or name,
            password=password or secrets.token_urlsafe(16),
            clock=self.clock,
            limit=limit or self.limit,
            period=self.period,
            window_rule=self.window_rule,
            push_url=push_url,
            documents=self.documents,
            real_shape=self.real_shape,
        )
        account.on_state_change = self._queue_push
        self.accounts[account.username] = account
        if self.oauth1 is not None:
            self.oauth1.issue_token(account.username)
        return account

    @property
    def username(self) -> str:
        return self.account.username

    @property
    def password(self) -> str:
        return self.account.password

    @property
    def auth(self) -> BasicAuth:
        return BasicAuth(self.account.username, self.account.password)

    def auth_for(self, account: Account) -> BasicAuth:
        return BasicAuth(account.username, account.password)

    @property
    def oauth1_auth(self) -> OAuth1Auth:
        """OAuth 1.0a credentials of the default account (the service made with `oauth1=True`)."""
        return self.oauth1_auth_for(self.account)

    def oauth1_auth_for(self, account: Account) -> OAuth1Auth:
        if self.oauth1 is None:
            raise RuntimeError("OAuth 1 is off: make the service with oauth1=True")
        token, secret = self.oauth1.token_of(account.username)
        return OAuth1Auth(self.oauth1.consumer_key, self.oauth1.consumer_secret, token, secret)

    def _origin(self, scheme: str, port: int) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{port}"

    @property
    def base_url(self) -> str:
        """The https address (or http with `tls=False`) that clients use."""
        self._require_started()
        return self._origin("https" if self.tls else "http", self._https_port)

    def base_url_for(self, account: Account) -> str:
        """The address of `account`: its own port with `port_per_account`, else `base_url`."""
        self._require_started()
        if not self.port_per_account:
            return self.base_url
        return self._origin("https" if self.tls else "http", self._ports[account.username])

    def serves(self, account: Account, local_port: int | None) -> bool:
        """Whether a request that reached `local_port` may act for `account`."""
        return not self.port_per_account or self._ports.get(account.username) == local_port

    @property
    def http_url(self) -> str | None:
        """The plain-http address that redirects to `base_url` (None without TLS)."""
        self._require_started()
        return self._origin("http", self._http_port) if self.redirect_listener else None

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """A client-side context trusting the server's certificate (None without TLS)."""
        return self._client_ssl

    def write_ca(self, path: str | os.PathLike[str]) -> None:
        """Write the CA certificate (PEM) that signed the server's certificate."""
        if self._ca is None:
            raise RuntimeError("no TLS: the service serves plain http")
        self._ca.cert_pem.write_to_path(str(path))

    def _require_started(self) -> None:
        if self._runner is None:
            raise RuntimeError("the fake service is not started: use 'async with' or start()")

    def client(self, account: Account | None = None, **kwargs: Any) -> InvoicingClient:
        """An `InvoicingClient` for an account of this server, with a budget of the
        account's own hourly limit unless given (HTTP Basic unless another `auth` is given)."""
        account = account or self.account
        return InvoicingClient(self.base_url_for(account), **self._client_options(account, kwargs))

    def blocking_client(
        self, account: Account | None = None, **kwargs: Any
    ) -> BlockingInvoicingClient:
        """`client()`'s `BlockingInvoicingClient`: for code that is not async. The service
        must then answer from a loop the caller does not block (`serve_in_thread()`)."""
        account = account or self.account
        return BlockingInvoicingClient(
            self.base_url_for(account), **self._client_options(account, kwargs)
        )

    def _client_options(self, account: Account, kwargs: dict[str, Any]) -> dict[str, Any]:
        if "budget" not in kwargs:
            window = account.window
            kwargs["budget"] = RateBudget(limit=window.limit, period=window.period)
        kwargs.setdefault("ssl", self.ssl_context)
        auth: Auth = kwargs.pop("auth", None) or self.auth_for(account)
        return {"auth": auth, **kwargs}

    @contextlib.contextmanager
    def serve_in_thread(self) -> Iterator[FakeInvoicingService]:
        """Started and served from an event loop in a thread of its own until the block
        ends: for tests that are not async (a Django view, a Celery task, a script), whose
        blocking calls would stop a loop they share with the service."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=loop.run_forever, name="invoicing-fake-service", daemon=True
        )
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.start(), loop).result(_THREAD_PATIENCE)
            try:
                yield self
            finally:
                asyncio.run_coroutine_threadsafe(self.stop(), loop).result(_THREAD_PATIENCE)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_THREAD_PATIENCE)
            loop.close()

    async def start(self) -> None:
        server_ssl = None
        if self.tls:
            self._ca, server_ssl, self._client_ssl = loopback_tls()
        self._runner = web.AppRunner(build_app(self), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=server_ssl)
        await site.start()
        self._https_port = _bound_port(self._runner)
        if self.port_per_account:
            await self._listen_per_account(server_ssl)
        if self.redirect_listener:
            self._redirect_runner = web.AppRunner(
                redirect_app(lambda: self.base_url), access_log=None, handle_signals=False
            )
            await self._redirect_runner.setup()
            plain = web.TCPSite(self._redirect_runner, self.host, 0)
            await plain.start()
            self._http_port = _bound_port(self._redirect_runner)

    async def _listen_per_account(self, server_ssl: ssl.SSLContext | None) -> None:
        """A site per account on the one runner; the default account keeps the first port."""
        assert self._runner is not None
        for username in self.accounts:
            if username == self.account.username:
                self._ports[username] = self._https_port
                continue
            site = web.TCPSite(self._runner, self.host, 0, ssl_context=server_ssl)
            await site.start()
            self._ports[username] = site.port

    async def stop(self) -> None:
        for task in list(self._push_tasks):
            task.cancel()
        if self._push_tasks:
            await asyncio.gather(*self._push_tasks, return_exceptions=True)
        if self._push_session is not None:
            await self._push_session.close()
            self._push_session = None
        if self._redirect_runner is not None:
            await self._redirect_runner.cleanup()
            self._redirect_runner = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeInvoicingService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _queue_push(self, account: Account, event: PushEvent) -> None:
        if account.push_url is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # a change made outside the server loop (data generation): no push
        task = loop.create_task(self._deliver(account.push_url, event))
        self._push_tasks.add(task)
        task.add_done_callback(self._push_tasks.discard)

    async def _deliver(self, url: str, event: PushEvent) -> None:
        if self._push_session is None:
            self._push_session = aiohttp.ClientSession()
        status: int | None = None
        try:
            async with self._push_session.post(
                url,
                data={"invoice_id": str(event.invoice_id), "state": event.state},
                timeout=aiohttp.ClientTimeout(total=10),
            ) as resp:
                status = resp.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            logger.info("push to %s failed: %s", url, exc)
        self.push_deliveries.append((url, event, status))

    async def wait_pushes(self) -> None:
        """Wait until every queued push has been delivered (or failed)."""
        while self._push_tasks:
            await asyncio.gather(*list(self._push_tasks), return_exceptions=True)


def _bound_port(runner: web.AppRunner) -> int:
    """The port the runner's one site listens on (asked for as port 0: any free one)."""
    port: int = runner.addresses[0][1]
    return port
