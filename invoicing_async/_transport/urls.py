"""URL rules: which base URLs are allowed and how an endpoint's URL is built. Pure."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import quote, urlencode

from yarl import URL

from invoicing_async.errors import InsecureTransportError

__all__ = [
    "account_host",
    "endpoint_url",
    "is_loopback",
    "normalize_prefix",
    "request_path",
    "validate_base_url",
]


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and localhost: the only hosts plain http may go to (tests)."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def validate_base_url(base_url: str | URL) -> URL:
    """The account's host as a URL; refuses http (but for loopback) and embedded credentials,
    never repeating a password given in the URL."""
    url = URL(base_url)
    shown = url.with_user(None).with_password(None) if url.user or url.password else url
    if url.scheme not in ("https", "http") or not url.host:
        raise ValueError(f"base URL must be an https:// address of the account's host: {shown}")
    if url.user is not None or url.password is not None:
        raise ValueError(f"put credentials in auth=, not in the base URL ({shown})")
    if url.scheme == "http" and not is_loopback(url.host):
        raise InsecureTransportError(
            f"refusing plain http to {url.host}: credentials would travel in clear text; "
            "use https:// (plain http is allowed only for loopback test servers)"
        )
    return url.with_query(None).with_fragment(None)


def normalize_prefix(api_prefix: str) -> str:
    """`api/v1.0/` -> `/api/v1.0`; an empty prefix stays empty."""
    stripped = api_prefix.strip("/")
    return f"/{stripped}" if stripped else ""


def endpoint_url(origin: URL, api_prefix: str, path: str) -> URL:
    """`https://host/base` + `/api/v1.0` + `/invoices.xml` (the path already escaped, as
    is a query after `?`)."""
    base_path = origin.raw_path.rstrip("/")
    path, mark, query = path.partition("?")
    url = origin.with_path(f"{base_path}{api_prefix}{path}", encoded=True)
    return URL(f"{url}?{query}", encoded=True) if mark else url


def account_host(url: URL) -> str:
    """An account's host as the budget keys it: with its port when one is written, so two
    fake accounts on two ports are two hours."""
    host = url.host or str(url)
    return host if url.explicit_port is None else f"{host}:{url.explicit_port}"


def request_path(path: str, fmt: str, params: Mapping[str, str | int] | None = None) -> str:
    """A caller's path below the API prefix as a request path: `contacts/3` ->
    `/contacts/3.json`, the format's suffix added to a last segment without one, unsafe
    characters escaped, `params` as the query (`?query=Ann&page=2`)."""
    escaped = quote("/" + path.lstrip("/"), safe="/%:@!$&'()*+,;=-._~")
    if "." not in escaped.rsplit("/", 1)[-1]:
        escaped = f"{escaped}.{fmt}"
    if params:
        escaped = f"{escaped}?{urlencode(params, quote_via=quote)}"
    return escaped
