"""The transport's pure decisions: URLs, redirects, failures, Retry-After, Date. No I/O."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
import pytest
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

import invoicing_async as ia
from invoicing_async._transport.failures import connection_failure
from invoicing_async._transport.redirects import MAX_REDIRECTS, next_hop
from invoicing_async._transport.response import retry_after_seconds, server_time
from invoicing_async._transport.urls import endpoint_url, is_loopback, validate_base_url

HTTPS = URL("https://acme.example.com/api/v1.0/invoices.xml")
TIMEOUT = aiohttp.ClientTimeout(total=3, connect=1)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.9.9.9", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("api.localhost", True),
        ("10.0.0.1", False),
        ("acme.example.com", False),
        ("localhost.example.com", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    "url",
    [
        "ftp://user:PW-secret@acme.example.com",
        "https://user:PW-secret@acme.example.com",
        "https://:PW-secret@acme.example.com/x",
    ],
)
def test_bad_base_urls_never_repeat_the_password(url: str) -> None:
    with pytest.raises(ValueError, match=r"acme\.example\.com") as info:
        validate_base_url(url)
    assert "PW-secret" not in str(info.value)


def test_plain_http_only_for_loopback() -> None:
    with pytest.raises(ia.InsecureTransportError):
        validate_base_url("http://acme.example.com")
    assert validate_base_url("http://127.0.0.1:8080/?q=1#f") == URL("http://127.0.0.1:8080/")


def test_endpoint_url_keeps_the_base_path_and_escapes() -> None:
    base = URL("https://acme.example.com/sub/")
    url = endpoint_url(base, "/api/v1.0", "/invoices/invoice_id/2014%2F0096.xml")
    assert url.raw_path == "/sub/api/v1.0/invoices/invoice_id/2014%2F0096.xml"


def hop(method: str, url: URL, status: int, location: str | None) -> object:
    return next_hop(method, url, status, location, b"<x/>", seen=frozenset({str(url)}))


def test_the_services_upgrade_to_https_is_followed_with_the_same_method() -> None:
    http = URL("http://acme.example.com:8080/api/v1.0/invoices.xml")
    redirect = next_hop(
        "POST",
        http,
        302,
        "https://acme.example.com:8443/api/v1.0/invoices.xml",
        b"<x/>",
        seen=frozenset({str(http)}),
    )
    assert redirect is not None
    assert (redirect.method, redirect.body, redirect.upgraded) == ("POST", b"<x/>", True)


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("https://evil.example.com/steal", "another host"),
        ("https://acme.example.com:8443/api", "another port"),
        ("http://acme.example.com/api", "insecure"),
        ("/api/v1.0/invoices.xml", "loop"),
    ],
)
def test_redirects_that_would_carry_credentials_elsewhere_are_refused(
    location: str, message: str
) -> None:
    with pytest.raises(ia.RedirectError, match=message):
        hop("GET", HTTPS, 301, location)


def test_too_many_redirects() -> None:
    seen = frozenset(f"https://acme.example.com/{n}" for n in range(MAX_REDIRECTS + 1))
    with pytest.raises(ia.RedirectError, match="more than"):
        next_hop("GET", HTTPS, 302, "/next", None, seen=seen)


def test_303_after_post_gets_the_result_instead_of_posting_again() -> None:
    redirect = next_hop(
        "POST", HTTPS, 303, "/api/v1.0/invoices/42.xml", b"<invoice/>", seen=frozenset({str(HTTPS)})
    )
    assert redirect is not None
    assert (redirect.method, redirect.body) == ("GET", None)


def test_not_a_redirect() -> None:
    assert hop("GET", HTTPS, 200, "/elsewhere") is None
    assert hop("GET", HTTPS, 302, None) is None


def _response_error() -> aiohttp.ClientResponseError:
    info = aiohttp.RequestInfo(
        URL("https://acme.example.com/x"),
        "GET",
        CIMultiDictProxy(CIMultiDict({"Authorization": "Basic YXBpOnMzY3JldA=="})),
        URL("https://acme.example.com/x"),
    )
    return aiohttp.ClientResponseError(info, (), status=400, message="bad status line")


FAILURES: list[tuple[Callable[[], BaseException], type[ia.APIConnectionError], bool]] = [
    (asyncio.TimeoutError, ia.APITimeoutError, True),
    (lambda: aiohttp.ServerDisconnectedError(), ia.APIConnectionError, True),
    (_response_error, ia.APIConnectionError, True),
]


@pytest.mark.parametrize(("make", "kind", "connected"), FAILURES)
def test_failures_map_to_typed_errors_without_credentials(
    make: Callable[[], BaseException], kind: type[ia.APIConnectionError], connected: bool
) -> None:
    failure = connection_failure(make(), "GET", HTTPS, TIMEOUT)
    assert type(failure.error) is kind
    assert failure.connected is connected
    everything = f"{failure.error!s} {failure.error!r} {failure.error.__cause__!r}"
    assert "YXBpOnMzY3JldA" not in everything
    assert "GET https://acme.example.com/api/v1.0/invoices.xml" in str(failure.error)


def test_a_timeout_says_which_limits_applied() -> None:
    failure = connection_failure(asyncio.TimeoutError(), "GET", HTTPS, TIMEOUT)
    assert "connect 1s, total 3s" in str(failure.error)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("12", 12.0),
        ("0.5", 0.5),
        ("-3", 0.0),
        ("nan", None),
        ("soon", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),
    ],
)
def test_retry_after(value: str, seconds: float | None) -> None:
    assert retry_after_seconds({"retry-after": value}) == seconds
    assert retry_after_seconds({}) is None


def test_server_time_from_the_date_header() -> None:
    assert server_time({"Date": "Wed, 30 Jul 2014 15:33:41 GMT"}) == 1406734421.0
    assert server_time({"date": "Wed, 30 Jul 2014 17:33:41 +0200"}) == 1406734421.0
    assert server_time({"Date": "garbage"}) is None
    assert server_time({}) is None
