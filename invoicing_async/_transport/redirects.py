"""Which redirects the client follows (pure): only the service's http -> https upgrade on
the same host and port; anything that would carry Authorization elsewhere is refused."""

from __future__ import annotations

import attrs
from yarl import URL

from invoicing_async.errors import RedirectError

__all__ = ["MAX_REDIRECTS", "REDIRECT_STATUSES", "Redirect", "next_hop"]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
_DEFAULT_PORTS = {"http": 80, "https": 443}


@attrs.frozen
class Redirect:
    """Where to send next, with which method and body; `upgraded` when http became https."""

    url: URL
    method: str
    body: bytes | None
    upgraded: bool


def _port(url: URL) -> int | None:
    return url.explicit_port or _DEFAULT_PORTS.get(url.scheme or "")


def next_hop(
    method: str,
    url: URL,
    status: int,
    location: str | None,
    body: bytes | None,
    *,
    seen: frozenset[str],
) -> Redirect | None:
    """The request to send after `status`, or None; `seen`: the URLs of this chain so far."""
    if status not in REDIRECT_STATUSES or not location:
        return None
    if len(seen) > MAX_REDIRECTS:
        raise RedirectError(f"{method} {url}: more than {MAX_REDIRECTS} redirects")
    target = url.join(URL(location))
    if target.user is not None or target.password is not None:
        raise RedirectError(
            f"{method} {url} redirected to a URL with credentials in it "
            f"({target.with_user(None)}); not followed"
        )
    if (target.host or "").lower() != (url.host or "").lower():
        raise RedirectError(
            f"{method} {url} redirected to another host ({target.host}); "
            "not followed, so credentials stay with the account's host"
        )
    upgraded = url.scheme == "http" and target.scheme == "https"
    if url.scheme == "https" and target.scheme != "https":
        raise RedirectError(f"{method} {url} redirected to insecure {target}; not followed")
    if not upgraded and _port(target) != _port(url):
        raise RedirectError(
            f"{method} {url} redirected to another port ({target}); not followed, so "
            "credentials stay with the account's server"
        )
    if str(target) in seen:
        raise RedirectError(f"{method} {url}: redirect loop at {target}")
    if status == 303 and method != "HEAD":
        # "See other": the request was processed; what remains is to GET the result.
        # Sending a POST again would repeat it.
        return Redirect(url=target, method="GET", body=None, upgraded=upgraded)
    return Redirect(url=target, method=method, body=body, upgraded=upgraded)
