"""The two authorization methods of the service: HTTP Basic and OAuth 1.0a (HMAC-SHA1),
producing each request's headers at send time; secrets never appear in `repr`."""

from __future__ import annotations

import functools
import typing
from typing import Any, Protocol, runtime_checkable

import aiohttp
import attrs
from oauthlib import oauth1

__all__ = ["Auth", "BasicAuth", "OAuth1Auth"]

FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"


@runtime_checkable
class Auth(Protocol):
    """Something that authorizes one request by returning headers to add to it."""

    def headers_for(
        self, method: str, url: str, body: bytes | None, content_type: str | None
    ) -> dict[str, str]: ...


# The header of a user is the same on every call: encoded once (it holds the password,
# as the `BasicAuth` it is made from does; a handful of users per process at most).
@functools.lru_cache(maxsize=64)
def _basic_header(username: str, password: str) -> str:
    return aiohttp.encode_basic_auth(username, password)


@attrs.frozen(repr=False)
class BasicAuth:
    """HTTP Basic with a user of the account (the service advises a dedicated API user)."""

    username: str
    password: str = attrs.field(default="")

    def headers_for(
        self,
        method: str,  # noqa: ARG002 - the `Auth` signature: Basic signs nothing
        url: str,  # noqa: ARG002
        body: bytes | None,  # noqa: ARG002
        content_type: str | None,  # noqa: ARG002
    ) -> dict[str, str]:
        return {"Authorization": _basic_header(self.username, self.password)}

    def __repr__(self) -> str:
        return f"BasicAuth(username={self.username!r}, password='***')"


@attrs.frozen(repr=False)
class OAuth1Auth:
    """OAuth 1.0a, HMAC-SHA1 signatures in the Authorization header (signed by oauthlib)."""

    consumer_key: str
    consumer_secret: str
    token: str
    token_secret: str

    def headers_for(
        self, method: str, url: str, body: bytes | None, content_type: str | None
    ) -> dict[str, str]:
        client = oauth1.Client(
            self.consumer_key,
            client_secret=self.consumer_secret,
            resource_owner_key=self.token,
            resource_owner_secret=self.token_secret,
            signature_method=oauth1.SIGNATURE_HMAC_SHA1,
            signature_type=oauth1.SIGNATURE_TYPE_AUTH_HEADER,
        )
        # Only form bodies take part in an OAuth 1 signature; XML and JSON bodies do not.
        form = body is not None and content_type == FORM_CONTENT_TYPE
        signed_body = body.decode("utf-8") if form and body is not None else None
        headers = {"Content-Type": FORM_CONTENT_TYPE} if form else {}
        _uri, signed, _body = client.sign(
            url, http_method=typing.cast(Any, method.upper()), body=signed_body, headers=headers
        )
        return {"Authorization": signed["Authorization"]}

    def __repr__(self) -> str:
        return (
            f"OAuth1Auth(consumer_key={self.consumer_key!r}, token={self.token!r}, secrets='***')"
        )
