"""The proxy variables (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`) read as curl
and requests read them, pure: a value without a scheme is `http://`, `NO_PROXY` takes
names and their subdomains, `.domain`, `*`, addresses, CIDR blocks and ports. A proxy's
credentials become its `Proxy-Authorization` header; no error carries a variable's value."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

import aiohttp
import attrs
from yarl import URL

from invoicing_async.errors import ConfigurationError

__all__ = ["NO_PROXY", "Proxy", "ProxySettings", "bypasses"]

#: Where a request goes through, and the headers that proxy wants (or None, None: direct).
Proxy = tuple[URL | None, dict[str, str] | None]
NO_PROXY: Proxy = (None, None)

_SCHEMES = ("http", "https")
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _variable(
    environ: Mapping[str, str], name: str, *, upper: bool = True
) -> tuple[str, str] | None:
    """(the variable's name as set, its value): lower case first, as curl and urllib do."""
    for each in (name.lower(), name.upper()) if upper else (name.lower(),):
        value = environ.get(each, "").strip()
        if value:
            return each, value
    return None


def _parse_proxy(name: str, value: str) -> Proxy:
    """`value` of variable `name` as a proxy address and its headers; a value that is no
    http(s) address is a `ConfigurationError` naming the variable, never its value (it may
    hold a password)."""
    text = value if "://" in value else "http://" + value
    try:
        address = URL(text)
        scheme, host, port = address.scheme.lower(), address.host, address.port
        bare = URL.build(scheme=scheme, host=host or "", port=port) if host else None
    except (ValueError, TypeError, UnicodeError):
        bare = None  # the parser's words quote the value: not kept
    if bare is None:
        raise ConfigurationError(f"{name} is not a proxy URL (expected http://host:port)")
    if scheme not in _SCHEMES:
        raise ConfigurationError(
            f"{name} names a proxy of a scheme this client cannot use: only http:// and "
            "https:// proxies are supported"
        )
    if address.user is None:
        return bare, None
    login = aiohttp.encode_basic_auth(address.user, address.password or "")
    return bare, {"Proxy-Authorization": login}


@attrs.frozen
class _Exemption:
    """One `NO_PROXY` entry: a name (and its subdomains), an address block, or every host;
    with a port it holds for that port only."""

    name: str | None = None
    network: _Network | None = None
    port: int | None = None
    everything: bool = False

    def covers(self, host: str, address: _Address | None, port: int | None) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.everything:
            return True
        if self.network is not None:
            return address is not None and address in self.network
        assert self.name is not None
        return host == self.name or host.endswith("." + self.name)


def _split_port(entry: str) -> tuple[str, int | None]:
    """`host:port`, `[v6]:port`, `[v6]`, a bare IPv6 address or block, or a plain host."""
    if entry.startswith("["):
        inside, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        return inside, int(port) if port.isdigit() else None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        if port.isdigit():
            return host, int(port)
    return entry, None


def _exemption(entry: str) -> _Exemption | None:
    entry = entry.strip().lower()
    if not entry:
        return None
    if entry == "*":
        return _Exemption(everything=True)
    host, port = _split_port(entry)
    try:
        return _Exemption(network=ipaddress.ip_network(host, strict=False), port=port)
    except ValueError:
        pass
    name = host.removeprefix("*").lstrip(".").rstrip(".")
    return _Exemption(name=name, port=port) if name else None


def bypasses(no_proxy: str, host: str, port: int | None = None) -> bool:
    """Whether `NO_PROXY`'s value `no_proxy` sends a request to `host` (`port`) direct."""
    host = host.strip("[]").rstrip(".").lower()
    try:
        address: _Address | None = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        address = None
    for entry in no_proxy.replace(" ", ",").split(","):
        found = _exemption(entry)
        if found is not None and found.covers(host, address, port):
            return True
    return False


@attrs.frozen
class ProxySettings:
    """The environment's proxies by scheme, read once, and its `NO_PROXY`."""

    proxies: Mapping[str, Proxy] = attrs.field(repr=False)  # headers hold credentials
    no_proxy: str = ""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ProxySettings:
        """`HTTPS_PROXY` for https, `HTTP_PROXY` for http, `ALL_PROXY` for either when its
        own is unset; a malformed one is a `ConfigurationError` naming it."""
        found: dict[str, Proxy] = {}
        fallback = _variable(environ, "ALL_PROXY")
        for scheme in _SCHEMES:
            # Under CGI `HTTP_PROXY` is the client's `Proxy:` header (httpoxy): not ours.
            cgi = scheme == "http" and "REQUEST_METHOD" in environ
            variable = _variable(environ, f"{scheme}_proxy", upper=not cgi)
            chosen = variable or fallback
            if chosen is not None:
                found[scheme] = _parse_proxy(*chosen)
        no_proxy = _variable(environ, "NO_PROXY")
        return cls(found, no_proxy[1] if no_proxy else "")

    def __bool__(self) -> bool:
        return bool(self.proxies)

    def proxy_for(self, url: URL) -> Proxy:
        """The proxy for `url`, or `NO_PROXY` (direct) when none or `NO_PROXY` names it."""
        proxy = self.proxies.get(url.scheme)
        if proxy is None or (url.host is not None and bypasses(self.no_proxy, url.host, url.port)):
            return NO_PROXY
        return proxy
