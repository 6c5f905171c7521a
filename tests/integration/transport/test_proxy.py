"""Proxies from the environment: `HTTPS_PROXY`/`HTTP_PROXY` are used, `NO_PROXY` and
`trust_env=False` keep requests direct. Through a real proxy on loopback that the test
starts: CONNECT tunnels for https, absolute-form requests for http."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import traceback
from collections.abc import AsyncIterator
from unittest import mock
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from yarl import URL

import invoicing_async as ia
from invoicing_async.testing import FakeInvoicingService
from tests.integration.transport.test_telemetry import Exported, exported, span_text
from tests.unit.transport.test_proxies import MALFORMED, PASSWORDS

__all__ = ["exported"]  # the fixture, imported

PROXY_VARIABLES = tuple(
    case(f"{name}_proxy")
    for name in ("https", "http", "all", "no")
    for case in (str.lower, str.upper)
)


class LoopbackProxy:
    """A small HTTP proxy: CONNECT opens a tunnel, any other request line is forwarded as
    it came to the origin it names. Each request head it got is kept."""

    def __init__(self) -> None:
        self.heads: list[list[str]] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    @property
    def request_lines(self) -> list[str]:
        return [head[0] for head in self.heads]

    async def __aenter__(self) -> LoopbackProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raw = await reader.readuntil(b"\r\n\r\n")
        head = raw.decode("latin-1").split("\r\n")[:-2]
        self.heads.append(head)
        method, target, _ = head[0].split(" ", 2)
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            upstream = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
        else:
            origin = URL(target)
            assert origin.host is not None
            upstream = await asyncio.open_connection(origin.host, origin.port)
            upstream[1].write(raw)
        await asyncio.gather(self._pipe(reader, upstream[1]), self._pipe(upstream[0], writer))

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


@pytest.fixture(autouse=True)
def _no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def proxy() -> AsyncIterator[LoopbackProxy]:
    async with LoopbackProxy() as running:
        yield running


@pytest.mark.parametrize("tls", [True, False], ids=["https", "http"])
async def test_requests_go_through_the_environments_proxy(
    proxy: LoopbackProxy, monkeypatch: pytest.MonkeyPatch, tls: bool
) -> None:
    if tls:  # with credentials, which the proxy gets and the service never sees
        monkeypatch.setenv("HTTPS_PROXY", proxy.url.replace("//", "//user:pa55@"))
    else:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
    async with (
        FakeInvoicingService(invoices=2, tls=tls) as service,
        service.client() as client,
    ):
        me = await client.current_session()
        assert len(await client.invoices.list()) == 2
        origin = URL(service.base_url)
    assert me.email
    if tls:  # one tunnel, kept alive for both requests
        assert proxy.request_lines == [f"CONNECT {origin.host}:{origin.port} HTTP/1.1"]
        login = base64.b64encode(b"user:pa55").decode()
        assert f"Proxy-Authorization: Basic {login}" in proxy.heads[0]
    else:  # absolute-form; the second request follows on the same connection
        assert proxy.request_lines == [f"GET {origin}/api/v1.0/current_session.xml HTTP/1.1"]


@pytest.mark.parametrize("direct", ["no_proxy", "trust_env=False"])
async def test_no_proxy_and_trust_env_false_go_direct(
    proxy: LoopbackProxy, monkeypatch: pytest.MonkeyPatch, direct: str
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    if direct == "no_proxy":
        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    async with (
        FakeInvoicingService(invoices=1) as service,
        ia.InvoicingClient(
            service.base_url,
            auth=service.auth,
            ssl=service.ssl_context,
            trust_env=direct != "trust_env=False",
        ) as client,
    ):
        assert len(await client.invoices.list()) == 1
    assert proxy.heads == []


@pytest.mark.parametrize("form", ["scheme-less", "http"])
async def test_a_proxy_without_a_scheme_is_used_with_its_credentials(
    proxy: LoopbackProxy, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """`puser:s3cret@host:port`, as curl and requests read it: once every call failed
    with the whole value, password included, in its message."""
    address = proxy.url.replace("http://", "puser:s3cret@")
    monkeypatch.setenv("HTTPS_PROXY", address if form == "scheme-less" else "http://" + address)
    async with (
        FakeInvoicingService(invoices=1) as service,
        service.client() as client,
    ):
        assert len(await client.invoices.list()) == 1
        origin = URL(service.base_url)
    assert proxy.request_lines == [f"CONNECT {origin.host}:{origin.port} HTTP/1.1"]
    assert (
        f"Proxy-Authorization: Basic {base64.b64encode(b'puser:s3cret').decode()}" in proxy.heads[0]
    )


@pytest.mark.parametrize("no_proxy", ["127.0.0.0/8", "127.0.0.1/32", ".0.0.1", "*"])
async def test_no_proxy_blocks_and_star_go_direct(
    proxy: LoopbackProxy, monkeypatch: pytest.MonkeyPatch, no_proxy: str
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", no_proxy)
    async with (
        FakeInvoicingService(invoices=1) as service,
        service.client() as client,
    ):
        assert len(await client.invoices.list()) == 1
    assert proxy.heads == []


def test_a_malformed_proxy_variable_fails_the_client_once_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`http://puser:s3cret@[::1` once raised a raw ValueError on every call."""
    monkeypatch.setenv("HTTPS_PROXY", "http://puser:s3cret@[::1")
    with pytest.raises(ia.ConfigurationError, match="HTTPS_PROXY") as caught:
        ia.InvoicingClient("https://acme.example.com", auth=ia.BasicAuth("u", "p"))
    assert "s3cret" not in str(caught.value)
    # A client told not to read the environment does not.
    ia.InvoicingClient("https://acme.example.com", auth=ia.BasicAuth("u", "p"), trust_env=False)


SCANNED_FORMS = [
    "puser:{p}@{h}",
    "http://puser:{p}@{h}",
    "https://puser:{p}@{h}",
    "HTTP://puser:{p}@{h}/",
    "http://puser:{p}@{h}/path?q=1#f",
    "http://:{p}@{h}",
    "http://{p}@{h}",
    "{p}@{h}",
    *(form.replace("127.0.0.1", "{h}") for form in MALFORMED),
]


def _everything_said(error: BaseException | None, records: list[logging.LogRecord]) -> str:
    formatter = logging.Formatter("%(levelname)s %(name)s %(message)s %(args)s")
    parts = [formatter.format(record) + repr(record.__dict__) for record in records]
    if error is not None:
        parts += traceback.format_exception(error)
        parts += [repr(error), repr(vars(error))]
    return "\n".join(parts)


@pytest.mark.parametrize("form", SCANNED_FORMS)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(password=PASSWORDS)
def test_no_proxy_password_reaches_an_error_a_log_line_a_span_or_a_metric(
    exported: Exported, password: str, form: str
) -> None:
    """Whatever the variable's form, working or not: the password, and the header made of
    it, are in no exception (its causes included), no log record, span or metric."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    async def scenario() -> BaseException | None:
        async def hang_up(_r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
        env["HTTPS_PROXY"] = form.format(p=password, h=f"127.0.0.1:{port}")
        try:
            with mock.patch.dict(os.environ, env, clear=True):
                retry = ia.RetryPolicy(attempts=2, base_delay=0.0, jitter=False)
                async with ia.InvoicingClient(
                    "https://127.0.0.1:9", auth=ia.BasicAuth("u", "p"), retry=retry
                ) as client:
                    await client.invoices.list()
        except ia.InvoicingError as exc:
            return exc
        finally:
            server.close()
            await server.wait_closed()
        return None

    package = logging.getLogger("invoicing_async")
    handler, level = Keep(logging.DEBUG), package.level
    package.addHandler(handler)
    package.setLevel(logging.DEBUG)
    try:
        error = asyncio.run(scenario())
    finally:
        package.removeHandler(handler)
        package.setLevel(level)
    assert isinstance(error, ia.InvoicingError)
    text = _everything_said(error, records) + span_text(exported.spans())
    text += exported.metrics_text()
    login = base64.b64encode(f"puser:{password}".encode()).decode()
    for secret in (password, login, quote(password, safe=""), quote(password)):
        assert secret not in text
