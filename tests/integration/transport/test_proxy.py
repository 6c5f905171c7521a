"""Proxies from the environment: `HTTPS_PROXY`/`HTTP_PROXY` are used, `NO_PROXY` and
`trust_env=False` keep requests direct. Through a real proxy on loopback that the test
starts: CONNECT tunnels for https, absolute-form requests for http."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator

import pytest
from yarl import URL

import invoicing_async as ia
from invoicing_async._transport.sender import env_proxy
from invoicing_async.testing import FakeInvoicingService

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy")


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


def test_credentials_in_the_proxy_url_become_its_authorization(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pa55@127.0.0.1:3128")
    address, headers = env_proxy(URL("https://acme.example.com/api/v1.0/invoices.xml"))
    assert address == URL("http://127.0.0.1:3128")
    assert headers == {"Proxy-Authorization": "Basic " + base64.b64encode(b"user:pa55").decode()}
    assert env_proxy(URL("http://acme.example.com/")) == (None, None)  # no HTTP_PROXY
