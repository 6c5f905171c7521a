"""The session wrapper against scripted loopback servers: retries, redirects, auth, limits."""

from __future__ import annotations

import asyncio
import gzip
import logging
import socket
from typing import Any

import aiohttp
import pytest
from oauthlib.oauth1 import RequestValidator, SignatureOnlyEndpoint

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async.testing import FakeInvoicingService
from tests.scripted import Reply, ScriptedAPI, Seen, scripted_client

SESSION = b"<user><id type='integer'>1</id><email>a@example.com</email></user>"
PATH = "/api/v1.0/current_session.xml"


async def test_get_is_retried_after_500_and_each_try_spends_budget(
    scripted: ScriptedAPI,
) -> None:
    scripted.reply("GET", PATH, 500, times=2)
    scripted.reply("GET", PATH, 200, SESSION)
    events: list[ia.RequestEvent] = []
    async with scripted_client(scripted, on_request=events.append) as client:
        me = await client.current_session()
        assert me.id == 1
        assert client.budget.snapshot().used_in_period == 3
    assert [e.status for e in events] == [500, 500, 200]
    assert [e.attempt for e in events] == [1, 2, 3]


async def test_retries_are_capped(scripted: ScriptedAPI) -> None:
    scripted.reply("GET", PATH, 503, times=5)
    async with scripted_client(scripted) as client:
        with pytest.raises(ia.ServerError):
            await client.current_session()
    assert len(scripted.seen) == 3


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_post_is_never_retried_after_reaching_the_server(
    scripted: ScriptedAPI, status: int
) -> None:
    scripted.reply("POST", "/api/v1.0/invoices/sync_fetch_ids.xml", status, times=3)
    async with scripted_client(scripted) as client:
        with pytest.raises(ia.ServerError):
            await client.invoices.sync_fetch_ids([1])
    assert len(scripted.seen) == 1


async def test_delete_is_retried_and_a_404_on_the_retry_means_done(
    scripted: ScriptedAPI,
) -> None:
    scripted.reply("DELETE", "/api/v1.0/invoices/4.xml", 502)
    scripted.reply("DELETE", "/api/v1.0/invoices/4.xml", 200)
    scripted.reply("DELETE", "/api/v1.0/invoices/5.xml", 503)  # it went through anyway
    scripted.reply("DELETE", "/api/v1.0/invoices/5.xml", 404)
    scripted.reply("DELETE", "/api/v1.0/invoices/6.xml", 404)  # first try: really unknown
    async with scripted_client(scripted) as client:
        await client.invoices.delete(4)
        await client.invoices.delete(5)
        with pytest.raises(ia.NotFoundError):
            await client.invoices.delete(6)
    assert [s.path[-6:] for s in scripted.seen] == ["/4.xml"] * 2 + ["/5.xml"] * 2 + ["/6.xml"]


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_a_put_answered_with_an_error_is_not_repeated(
    scripted: ScriptedAPI, status: int
) -> None:
    scripted.reply("PUT", "/api/v1.0/invoices/4/send_reminder.xml", status)
    async with scripted_client(scripted) as client:
        with pytest.raises(ia.ServerError):
            await client.invoices.send_reminder(
                4, email="a@example.com", invoice_email="Pay", send_method="email"
            )
    assert len(scripted.seen) == 1  # one reminder, not two emails to the customer


async def test_a_put_that_times_out_is_not_repeated(scripted: ScriptedAPI) -> None:
    async def late(_seen: Seen) -> Reply:
        await scripted.closing.wait()  # the service applies the change, then answers too late
        return 200, b"<invoice><id type='integer'>4</id></invoice>", {}

    scripted.script("PUT", "/api/v1.0/invoices/4.xml", late, times=3)
    async with scripted_client(scripted, timeout=0.2) as client:
        with pytest.raises(ia.APITimeoutError):
            await client.invoices.update(
                4, details=[m.InvoiceDetail(description="x", tax_rate_id=1)]
            )
    assert len(scripted.seen) == 1  # one new line, not two


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_connection_refused_is_retried_even_for_post_and_wrapped() -> None:
    events: list[ia.RequestEvent] = []
    client = ia.InvoicingClient(
        f"http://127.0.0.1:{_closed_port()}",
        auth=ia.BasicAuth("u", "p"),
        retry=ia.RetryPolicy(attempts=3, base_delay=0, max_delay=0),
        on_request=events.append,
    )
    async with client:
        with pytest.raises(ia.APIConnectionError) as info:
            await client.invoices.sync_fetch_ids([1])
    assert isinstance(info.value.__cause__, aiohttp.ClientConnectorError)
    assert len(events) == 3  # the POST never reached a server, so trying again is safe


async def test_timeout_raises_api_timeout_error_with_cause(scripted: ScriptedAPI) -> None:
    async def late(_seen: Seen) -> Reply:
        await scripted.closing.wait()  # after the client gave up
        return 200, SESSION, {}

    scripted.script("GET", PATH, late, times=2)
    async with scripted_client(
        scripted, timeout=0.2, retry=ia.RetryPolicy(attempts=2, base_delay=0, max_delay=0)
    ) as client:
        with pytest.raises(ia.APITimeoutError) as info:
            await client.current_session()
    assert isinstance(info.value.__cause__, asyncio.TimeoutError)
    assert "timed out" in str(info.value)
    assert len(scripted.seen) == 2


async def test_403_budget_raises_rate_limit_and_blocks_further_requests(
    scripted: ScriptedAPI,
) -> None:
    scripted.reply("GET", PATH, 403, b"Rate limit exceeded", {"X-RateLimit-Remaining": "0"})
    async with scripted_client(scripted, max_wait=5) as client:
        with pytest.raises(ia.RateLimitExceeded) as info:
            await client.current_session()
        assert info.value.status == 403
        assert info.value.retry_after is not None
        assert info.value.retry_after > 5
        with pytest.raises(ia.RateLimitExceeded) as second:
            await client.current_session()
        assert second.value.status == 0  # stopped by the client: nothing was sent
    assert len(scripted.seen) == 1


async def test_server_remaining_allows_exactly_that_many_more(scripted: ScriptedAPI) -> None:
    for remaining in ("2", "1", "0"):
        scripted.reply("GET", PATH, 200, SESSION, {"X-RateLimit-Remaining": remaining})
    async with scripted_client(scripted, max_wait=0) as client:
        await client.current_session()  # server: 2 left
        await client.current_session()
        await client.current_session()
        with pytest.raises(ia.RateLimitExceeded):
            await client.current_session()
    assert len(scripted.seen) == 3


def test_plain_http_to_a_real_host_is_refused_before_sending() -> None:
    with pytest.raises(ia.InsecureTransportError, match=r"acme\.example\.com"):
        ia.InvoicingClient("http://acme.example.com", auth=ia.BasicAuth("u", "p"))
    for host in ("http://127.0.0.1:9", "http://localhost:9", "http://[::1]:9", "http://127.8.9.10"):
        ia.InvoicingClient(host, auth=ia.BasicAuth("u", "p"))


def test_credentials_in_the_url_are_refused() -> None:
    with pytest.raises(ValueError, match="auth="):
        ia.InvoicingClient("https://u:p@acme.example.com", auth=ia.BasicAuth("u", "p"))


async def test_redirect_to_another_host_is_not_followed(scripted: ScriptedAPI) -> None:
    scripted.reply("GET", PATH, 302, b"", {"Location": "https://evil.example.net/steal"})
    async with scripted_client(scripted) as client:
        with pytest.raises(ia.RedirectError, match="another host"):
            await client.current_session()
    assert len(scripted.seen) == 1


async def test_redirect_from_https_down_to_http_is_not_followed() -> None:
    async with ScriptedAPI(tls=True) as server:
        server.reply("GET", PATH, 302, b"", {"Location": f"http://127.0.0.1:{server.port}{PATH}"})
        async with scripted_client(server, ssl=server.client_ssl) as client:
            with pytest.raises(ia.RedirectError, match="insecure"):
                await client.current_session()
        assert len(server.seen) == 1


async def test_redirect_to_a_url_with_credentials_is_not_followed(
    scripted: ScriptedAPI,
) -> None:
    location = f"http://intruder:pw-in-url@127.0.0.1:{scripted.port}/api/v1.0/other.xml"
    scripted.reply("GET", PATH, 302, b"", {"Location": location})
    async with scripted_client(scripted) as client:
        with pytest.raises(ia.RedirectError, match="credentials") as caught:
            await client.current_session()
    assert "pw-in-url" not in str(caught.value)
    assert len(scripted.seen) == 1


async def test_redirect_loop_is_an_error(scripted: ScriptedAPI) -> None:
    scripted.reply("GET", PATH, 302, b"", {"Location": "/api/v1.0/other.xml"})
    scripted.reply("GET", "/api/v1.0/other.xml", 302, b"", {"Location": PATH})
    async with scripted_client(scripted) as client:
        with pytest.raises(ia.RedirectError, match="loop"):
            await client.current_session()


async def test_http_is_upgraded_to_https_on_the_same_host() -> None:
    async with FakeInvoicingService() as service:
        assert service.http_url is not None
        async with ia.InvoicingClient(
            service.http_url,
            auth=service.auth,
            ssl=service.ssl_context,
            budget=ia.RateBudget(limit=1000),
        ) as client:
            assert (await client.current_session()).email == "api-user@example.com"
            await client.current_session()
        paths = [r.path for r in service.account.requests]
        assert paths == [PATH, PATH]  # the second went straight to https


async def test_untrusted_certificate_is_an_error_not_retried() -> None:
    async with FakeInvoicingService() as service:
        async with ia.InvoicingClient(service.base_url, auth=service.auth) as client:
            with pytest.raises(ia.APIConnectionError, match="certificate"):
                await client.current_session()
        assert service.account.requests == []


async def test_basic_auth_and_negotiation_headers(scripted: ScriptedAPI, fmt: str) -> None:
    scripted.reply("PUT", "/api/v1.0/invoices/1.xml", 200, b"")
    scripted.reply(
        "GET",
        "/api/v1.0/invoices/1.xml",
        200,
        b'{"invoice": {"id": 1}}' if fmt == "json" else b"<invoice/>",
    )
    async with scripted_client(scripted, fmt) as client:
        await client.invoices.update(1, po_number="x")
    put, _get = scripted.seen
    content_type = "application/json" if fmt == "json" else "application/xml"
    assert put.headers["Accept"] == content_type
    assert put.headers["Content-Type"] == content_type
    assert put.headers["Authorization"] == aiohttp.encode_basic_auth("api-user", "s3cret-pw")
    assert put.headers["User-Agent"].startswith(f"invoicing-async/{ia.__version__}")


class _Validator(RequestValidator):
    """oauthlib's own server-side check of our signatures."""

    enforce_ssl = False
    safe_characters = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")

    @property
    def dummy_client(self) -> str:
        return "dummy-client-key-000"

    @property
    def dummy_resource_owner(self) -> str:
        return "dummy-token-000000000"

    @property
    def client_key_length(self) -> tuple[int, int]:
        return 3, 50

    @property
    def access_token_length(self) -> tuple[int, int]:
        return 3, 50

    @property
    def nonce_length(self) -> tuple[int, int]:
        return 10, 50

    def validate_client_key(self, client_key: str, request: object) -> bool:
        return client_key == "consumer-key"

    def get_client_secret(self, client_key: str, request: object) -> str:
        return "consumer-secret"

    def validate_access_token(self, client_key: str, token: str, request: object) -> bool:
        return token == "token-abc"

    def get_access_token_secret(self, client_key: str, token: str, request: object) -> str:
        return "token-secret"

    def validate_timestamp_and_nonce(self, *args: object, **kwargs: object) -> bool:
        return True


@pytest.mark.parametrize("secret", ["token-secret", "wrong-secret"])
async def test_oauth1_signature_verifies_with_oauthlib(scripted: ScriptedAPI, secret: str) -> None:
    endpoint = SignatureOnlyEndpoint(_Validator())
    verdicts: list[bool] = []

    def check(seen: Seen) -> Reply:
        valid, _ = endpoint.validate_request(
            seen.url, http_method=seen.method, body=None, headers=seen.headers
        )
        verdicts.append(valid)
        return 200, SESSION, {}

    scripted.script("GET", PATH, check)
    auth = ia.OAuth1Auth("consumer-key", "consumer-secret", "token-abc", secret)
    async with scripted_client(scripted, auth=auth) as client:
        await client.current_session()
    assert verdicts == [secret == "token-secret"]
    assert scripted.seen[0].headers["Authorization"].startswith("OAuth ")
    assert 'oauth_signature_method="HMAC-SHA1"' in scripted.seen[0].headers["Authorization"]


async def test_secrets_never_in_repr_logs_or_errors(
    scripted: ScriptedAPI, caplog: pytest.LogCaptureFixture
) -> None:
    basic = ia.BasicAuth("api-user", "s3cret-pw")
    oauth = ia.OAuth1Auth("ck", "consumer-s3cret", "tok", "token-s3cret")
    assert "s3cret" not in repr(basic) + repr(oauth)
    scripted.reply("GET", PATH, 401, b"HTTP Basic: Access denied.")
    caplog.set_level(logging.DEBUG, logger="invoicing_async")
    client = scripted_client(scripted, auth=basic)
    assert "s3cret" not in repr(client)
    async with client:
        with pytest.raises(ia.AuthenticationError) as info:
            await client.current_session()
    text = str(info.value) + repr(info.value) + info.value.body_excerpt + str(info.value.headers)
    assert "s3cret" not in text
    assert "s3cret" not in caplog.text
    assert f"GET {PATH} -> 401" in caplog.text


async def test_response_size_is_bounded(scripted: ScriptedAPI) -> None:
    scripted.reply("GET", PATH, 200, b"<user>" + b"x" * 5000 + b"</user>")
    async with scripted_client(scripted, max_response_bytes=1000) as client:
        with pytest.raises(ia.ResponseTooLargeError, match="max_response_bytes"):
            await client.current_session()


async def test_a_large_body_is_joined_off_the_event_loop(
    scripted: ScriptedAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Joining tens of megabytes of chunks held the loop up to ~60 ms; past a megabyte the
    join runs in a thread, and the body is the same."""
    joined: list[int] = []
    to_thread = asyncio.to_thread

    async def spy(fn: Any, chunks: list[bytes]) -> Any:
        joined.append(sum(map(len, chunks)))
        return await to_thread(fn, chunks)

    monkeypatch.setattr(asyncio, "to_thread", spy)
    padded = SESSION.replace(b"</user>", b"<!--" + b" " * 3_000_000 + b"--></user>")
    scripted.reply("GET", PATH, 200, padded)
    scripted.reply("GET", PATH, 200, SESSION)
    async with scripted_client(scripted) as client:
        assert (await client.current_session()).email == "a@example.com"
        assert joined == [len(padded)]
        await client.current_session()  # a small body is joined in place
        assert joined == [len(padded)]


async def test_a_gzip_bomb_is_bounded_by_its_decompressed_size(scripted: ScriptedAPI) -> None:
    """50 MB of zeros travel as ~50 KB; the bound counts what they inflate to."""
    inflated = b"<user>" + b"0" * 50_000_000 + b"</user>"
    bomb = gzip.compress(inflated, compresslevel=9)
    assert len(bomb) < 100_000
    scripted.reply("GET", PATH, 200, bomb, {"Content-Encoding": "gzip"})
    async with scripted_client(scripted, max_response_bytes=1_000_000) as client:
        with pytest.raises(ia.ResponseTooLargeError, match="not read further"):
            await client.current_session()


async def test_borrowed_session_is_not_closed(scripted: ScriptedAPI) -> None:
    scripted.reply("GET", PATH, 200, SESSION)
    async with aiohttp.ClientSession() as session:
        async with scripted_client(scripted, session=session) as client:
            await client.current_session()
        assert not session.closed


async def test_owned_session_is_closed_and_lazy_use_works(scripted: ScriptedAPI) -> None:
    scripted.reply("GET", PATH, 200, SESSION)
    client = scripted_client(scripted)
    await client.current_session()  # no `async with`: the session opens on first use
    states = [client.is_closed]
    assert client.requests_sent == 1
    await client.aclose()
    states.append(client.is_closed)  # and no unclosed-session warning (warnings are errors)
    assert states == [False, True]
    with pytest.raises(ia.ClientClosedError, match="create a new InvoicingClient"):
        await client.current_session()
    assert client.requests_sent == 1


async def test_api_prefix_is_configurable(scripted: ScriptedAPI) -> None:
    scripted.reply("GET", "/api/v2/current_session.xml", 200, SESSION)
    async with scripted_client(scripted, api_prefix="/api/v2") as client:
        await client.current_session()
    assert scripted.seen[0].path == "/api/v2/current_session.xml"
