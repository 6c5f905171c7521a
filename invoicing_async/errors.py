"""The exception hierarchy: one class per way a call can fail, all under `InvoicingError`.

This module sits below every other layer (the wire codecs raise `DecodeError`), so it
imports nothing of the package. `FieldError` lives here for the same reason and is
re-exported by `invoicing_async.models`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

__all__ = [
    "APIConnectionError",
    "APITimeoutError",
    "AuthenticationError",
    "BudgetUnavailableError",
    "ClientClosedError",
    "ConfigurationError",
    "DecodeError",
    "EventLoopError",
    "FieldError",
    "ForbiddenError",
    "HTTPStatusError",
    "IdempotencyKeyError",
    "InsecureTransportError",
    "InvalidArgumentError",
    "InvoicingError",
    "JournalError",
    "NotAcceptableError",
    "NotFoundError",
    "NotImplementedByServerError",
    "RateLimitExceeded",
    "RedirectError",
    "ResponseTooLargeError",
    "ServerError",
    "StoreError",
    "ValidationError",
    "WriteUnsettledError",
]

BODY_EXCERPT_CHARS = 500


@attrs.frozen
class FieldError:
    """One complaint of a 422 document: the attribute (None for the whole entity) and why."""

    attribute: str | None
    message: str

    def __str__(self) -> str:
        return f"{self.attribute}: {self.message}" if self.attribute else self.message


class InvoicingError(Exception):
    """Base class of every error this package raises."""


class InsecureTransportError(InvoicingError):
    """A plain-http address for a non-loopback host: refused before anything is sent."""


class DecodeError(InvoicingError):
    """A body that cannot be read as the document it should be.

    `position` is (line, column) for XML syntax errors when the parser reports one.
    """

    def __init__(self, message: str, *, position: tuple[int, int] | None = None) -> None:
        if position is not None:
            message = f"{message} (line {position[0]}, column {position[1]})"
        super().__init__(message)
        self.position = position


class ResponseTooLargeError(InvoicingError):
    """A response larger than `max_response_bytes`: not read further (a limit, not bad data)."""


class ConfigurationError(InvoicingError, ValueError):
    """Settings that cannot work (from the environment, an accounts file): names what to set."""


class ClientClosedError(InvoicingError, RuntimeError):
    """The client was used after `aclose()` (or after its `async with` block): make a new one."""


class BudgetUnavailableError(InvoicingError):
    """A shared budget's store (SQLite, PostgreSQL, Redis) could not be reached in time.

    Nothing was sent: a budget that cannot be checked fails closed rather than risk the
    account's hour. The message names the store and the cause.
    """


class EventLoopError(InvoicingError, RuntimeError):
    """A client used on another event loop than the one its connections were opened on
    (two `asyncio.run` calls, two test loops). Make one client per loop."""


class StoreError(InvoicingError):
    """The local store cannot be used: unreadable, corrupt, read-only, full, or of a newer
    schema. The message names the file, the cause and what to do; nothing was changed."""


class IdempotencyKeyError(InvoicingError, ValueError):
    """An idempotency key that cannot be used: empty, longer than the marker field holds, or
    used before for another request. Raised before anything is sent."""


class JournalError(StoreError):
    """The write journal cannot be reached or read (corrupt, not a journal). Keyed writes
    fail closed: nothing was sent."""


class WriteUnsettledError(InvoicingError):
    """A keyed write may have been applied and looking could not tell (the look failed too).
    The journal keeps its intent: the next use of the key, or
    `client.resolve_pending_writes()`, settles it. The failure is the `__cause__`."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class APIConnectionError(InvoicingError):
    """The request did not get a response: DNS, refused connection, reset, TLS failure.

    The aiohttp exception is the `__cause__`.
    """

    def __init__(self, message: str, *, method: str = "", url: str = "") -> None:
        super().__init__(message)
        self.method = method
        self.url = url


class APITimeoutError(APIConnectionError):
    """The request or its response did not finish within the configured timeout."""


class RedirectError(InvoicingError):
    """A redirect that the client refuses to follow: another host, a downgrade, a loop."""


class HTTPStatusError(InvoicingError):
    """A response with a status the operation does not accept.

    Carries what is needed to act on it and to report it: status, method, URL (never
    with credentials), response headers and the first characters of the body.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        method: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> None:
        self.status = status
        self.method = method
        self.url = url
        self.headers: dict[str, str] = dict(headers or {})
        self.body_excerpt = body[:BODY_EXCERPT_CHARS].decode("utf-8", "replace")
        request = " ".join(part for part in (method, url) if part)
        if status:
            message = f"{request} -> {status}: {message}"
        elif request:
            message = f"{request}: {message}"  # status 0: refused before sending
        super().__init__(message)


class AuthenticationError(HTTPStatusError):
    """401: no or wrong credentials."""


class ForbiddenError(HTTPStatusError):
    """403 that is not the hourly budget: the user may not do this."""


class RateLimitExceeded(HTTPStatusError):
    """The hourly request budget is spent, by the server's word (403) or the client's count.

    `retry_after` is the client's estimate, in seconds, of when capacity returns (the
    service sends no reset header, so this is an estimate, never a promise).
    `status` is 403 when the server refused, 0 when the client stopped the request first.
    """

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None,
        status: int = 0,
        method: str = "",
        url: str = "",
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, status=status, method=method, url=url, headers=headers, body=body)


class NotFoundError(HTTPStatusError):
    """404: the entity or the action does not exist."""


class NotAcceptableError(HTTPStatusError):
    """406: the action is not available in the API."""


class NotImplementedByServerError(HTTPStatusError):
    """501: the action is not available in the API."""


class ServerError(HTTPStatusError):
    """5xx: processing failed on the service side (retried for idempotent methods)."""


class ValidationError(HTTPStatusError):
    """422 (or the same rule checked before sending): invalid attributes.

    `errors` lists each attribute and its message, in the form the service uses.
    `status` is 0 when the client refused the request before sending it.
    """

    def __init__(
        self,
        errors: Sequence[FieldError],
        *,
        status: int = 0,
        method: str = "",
        url: str = "",
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> None:
        self.errors = list(errors)
        summary = "; ".join(str(e) for e in self.errors) or "invalid entity"
        # Status 0: raised by client-side validation, nothing was sent.
        message = f"invalid: {summary}" if status else f"not sent, invalid: {summary}"
        super().__init__(message, status=status, method=method, url=url, headers=headers, body=body)


class InvalidArgumentError(ValidationError, TypeError, ValueError):
    """An argument no request may carry, refused before sending: an attribute the model
    does not have (misspelt) or one that is read-only, in `update(id, **changes)`.

    A `ValidationError` (status 0, `errors` names each bad attribute and what is accepted),
    so a handler that answers `InvoicingError` answers this too; still a `TypeError` and a
    `ValueError` for code written against the plain ones.
    """
