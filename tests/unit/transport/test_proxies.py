"""The proxy variables as curl and requests read them: scheme-less values, NO_PROXY's
names, blocks and ports, and no error that quotes a value."""

from __future__ import annotations

import base64
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st
from yarl import URL

import invoicing_async as ia
from invoicing_async._transport.proxies import NO_PROXY, ProxySettings, bypasses

HTTPS = URL("https://acme.example.com/api/v1.0/invoices.xml")


def login(user: str, password: str) -> dict[str, str]:
    return {
        "Proxy-Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    }


@pytest.mark.parametrize(
    "value",
    [
        "puser:s3cret@127.0.0.1:3128",
        "http://puser:s3cret@127.0.0.1:3128",
        " HTTP://puser:s3cret@127.0.0.1:3128 ",
    ],
)
def test_a_proxy_without_a_scheme_is_http_with_its_credentials_as_a_header(value: str) -> None:
    settings = ProxySettings.from_environ({"HTTPS_PROXY": value})
    assert settings.proxy_for(HTTPS) == (URL("http://127.0.0.1:3128"), login("puser", "s3cret"))
    assert settings.proxy_for(URL("http://acme.example.com/")) == NO_PROXY  # no HTTP_PROXY
    assert "s3cret" not in repr(settings)


def test_lower_case_wins_all_proxy_fills_in_and_cgi_ignores_http_proxy() -> None:
    env = {"https_proxy": "a:1", "HTTPS_PROXY": "b:2", "ALL_PROXY": "c:3"}
    settings = ProxySettings.from_environ(env)
    assert settings.proxy_for(HTTPS)[0] == URL("http://a:1")
    assert settings.proxy_for(URL("http://x/"))[0] == URL("http://c:3")
    cgi = ProxySettings.from_environ({"HTTP_PROXY": "evil:1", "REQUEST_METHOD": "GET"})
    assert not cgi
    assert cgi.proxy_for(URL("http://x/")) == NO_PROXY


PASSWORDS = st.text(string.ascii_letters + string.digits + "!$&'()*+,;=-._~", min_size=8).map(
    lambda text: "Zq" + text
)
MALFORMED = [
    "http://puser:{p}@[::1",
    "puser:{p}@[::1",
    "http://puser:{p}@[::1]:99999",
    "http://puser:{p}@127.0.0.1:port",
    "http://puser:{p}@",
    "puser:{p}@",
    "socks5://puser:{p}@127.0.0.1:1080",
    "ftp://puser:{p}@127.0.0.1:21",
    "http://puser:{p}@127.0.0.1:3128:3128",
    "http://puser:{p}@exa mple:1",
]


@given(
    password=PASSWORDS,
    form=st.sampled_from(MALFORMED),
    variable=st.sampled_from(["HTTPS_PROXY", "http_proxy", "ALL_PROXY"]),
)
def test_a_malformed_proxy_variable_is_one_configuration_error_naming_it_not_its_value(
    password: str, form: str, variable: str
) -> None:
    with pytest.raises(ia.ConfigurationError) as caught:
        ProxySettings.from_environ({variable: form.format(p=password)})
    text = str(caught.value) + repr(caught.value)
    assert variable in text
    assert password not in text
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None


@pytest.mark.parametrize(
    ("no_proxy", "host", "port", "direct"),
    [
        ("127.0.0.0/8", "127.0.0.1", 443, True),
        ("127.0.0.0/8", "127.1.2.3", 80, True),
        ("127.0.0.0/8", "128.0.0.1", 80, False),
        ("10.0.0.0/8", "localhost", 80, False),
        ("::1/128", "::1", 443, True),
        ("::1/128", "[::1]", 443, True),
        ("::1", "::1", 443, True),
        ("[::1]", "::1", 443, True),
        ("[::1]:8443", "::1", 443, False),
        ("fe80::/10", "fe80::1%eth0", 443, True),
        ("127.0.0.1", "127.0.0.1", 443, True),
        ("example.com", "example.com", 443, True),
        ("example.com", "api.example.com", 443, True),
        ("example.com", "badexample.com", 443, False),
        (".example.com", "api.example.com", 443, True),
        (".example.com", "example.com", 443, True),
        ("*.example.com", "api.example.com", 443, True),
        ("EXAMPLE.com", "Api.Example.COM.", 443, True),
        ("example.com:8443", "example.com", 443, False),
        ("example.com:8443", "example.com", 8443, True),
        ("127.0.0.1:8443", "127.0.0.1", 8443, True),
        ("*", "anything.example", 443, True),
        ("a.test, b.test ,c.test", "b.test", 443, True),
        ("a.test b.test", "b.test", 443, True),
        ("", "example.com", 443, False),
        (",,", "example.com", 443, False),
        ("not/a/block", "example.com", 443, False),
    ],
)
def test_no_proxy_takes_names_blocks_ports_and_star(
    no_proxy: str, host: str, port: int, direct: bool
) -> None:
    assert bypasses(no_proxy, host, port) is direct


def test_no_proxy_sends_a_cidr_block_direct() -> None:
    settings = ProxySettings.from_environ(
        {"HTTPS_PROXY": "127.0.0.1:3128", "NO_PROXY": "127.0.0.0/8"}
    )
    assert settings.proxy_for(URL("https://127.0.0.1:8443/")) == NO_PROXY
    assert settings.proxy_for(HTTPS)[0] == URL("http://127.0.0.1:3128")
