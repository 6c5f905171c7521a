"""OAuth 1.0a as the service accepted it: HMAC-SHA1 signatures in the Authorization
header, checked by oauthlib's server side (signature, timestamp within 10 minutes, each
nonce once)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from typing import Any

from oauthlib import oauth1

__all__ = ["OAuth1Verifier"]

FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"


def _key() -> str:
    """A key or secret within oauthlib's default bounds: 20-30 letters and digits."""
    return secrets.token_hex(12)


class _Validator(oauth1.RequestValidator):
    """What oauthlib asks of the service: the keys it knows and the nonces it has seen."""

    enforce_ssl = False  # the fake may serve plain http on loopback (tls=False)
    allowed_signature_methods = (oauth1.SIGNATURE_HMAC_SHA1,)
    nonce_length = (8, 64)  # other clients' nonces are longer than oauthlib's own
    dummy_client = dummy_access_token = "0" * 24

    def __init__(self, verifier: OAuth1Verifier) -> None:
        super().__init__()
        self._verifier = verifier
        self._dummy_secret = _key()

    def validate_client_key(self, client_key: str, request: Any) -> bool:
        return secrets.compare_digest(client_key, self._verifier.consumer_key)

    def get_client_secret(self, client_key: str, request: Any) -> str:
        if secrets.compare_digest(client_key, self._verifier.consumer_key):
            return self._verifier.consumer_secret
        return self._dummy_secret

    def validate_access_token(self, client_key: str, token: str, request: Any) -> bool:
        return token in self._verifier.tokens

    def get_access_token_secret(self, client_key: str, token: str, request: Any) -> str:
        found = self._verifier.tokens.get(token)
        return found[0] if found else self._dummy_secret

    def validate_realms(self, *args: Any, **kwargs: Any) -> bool:
        return True  # the service had no realms

    def validate_timestamp_and_nonce(
        self,
        client_key: str,
        timestamp: str,
        nonce: str,
        request: Any,
        request_token: str | None = None,
        access_token: str | None = None,
    ) -> bool:
        return self._verifier.first_use(client_key, timestamp, nonce, access_token)


class OAuth1Verifier:
    """One consumer and an access token per account; `verify` returns the username whose
    token signed a request, or None for any bad, stale or replayed one."""

    def __init__(self) -> None:
        self.consumer_key = _key()
        self.consumer_secret = _key()
        self.tokens: dict[str, tuple[str, str]] = {}  # token -> (secret, username)
        self._validator = _Validator(self)
        self._endpoint = oauth1.ResourceEndpoint(self._validator)
        self._nonces: dict[tuple[str, str, str, str | None], int] = {}

    def issue_token(self, username: str) -> tuple[str, str]:
        """A new access token and its secret for the account of `username`."""
        token, secret = _key(), _key()
        self.tokens[token] = (secret, username)
        return token, secret

    def token_of(self, username: str) -> tuple[str, str]:
        """(token, secret) of the account of `username`."""
        for token, (secret, owner) in self.tokens.items():
            if owner == username:
                return token, secret
        raise KeyError(f"no OAuth token for {username!r}")

    def first_use(self, client_key: str, timestamp: str, nonce: str, token: str | None) -> bool:
        """Record a nonce; False when seen with the same timestamp, key and token (nonces past
        the timestamp window are forgotten)."""
        oldest = int(time.time()) - self._validator.timestamp_lifetime
        if len(self._nonces) > 1000:
            self._nonces = {k: ts for k, ts in self._nonces.items() if ts >= oldest}
        key = (client_key, timestamp, nonce, token)
        if key in self._nonces:
            return False
        self._nonces[key] = int(timestamp)  # oauthlib has checked it: ten digits
        return True

    def verify(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> str | None:
        """The username whose token signed this request validly, else None."""
        form = headers.get("Content-Type", "").split(";")[0].strip() == FORM_CONTENT_TYPE
        signed_body = body.decode("utf-8", "replace") if form and body else None
        oauth_headers = {"Authorization": headers.get("Authorization", "")}
        if form:
            oauth_headers["Content-Type"] = FORM_CONTENT_TYPE
        valid, request = self._endpoint.validate_protected_resource_request(
            url, http_method=method, body=signed_body, headers=oauth_headers
        )
        if not valid or request is None:
            return None
        return self.tokens[request.resource_owner_key][1]
