"""From status, headers and body to a result or a typed error: no I/O, so it tests alone."""

from __future__ import annotations

import email.utils
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from multidict import CIMultiDict, CIMultiDictProxy

from invoicing_async._models.documents import Format, load_field_errors
from invoicing_async.errors import (
    AuthenticationError,
    ForbiddenError,
    HTTPStatusError,
    NotAcceptableError,
    NotFoundError,
    NotImplementedByServerError,
    RateLimitExceeded,
    ServerError,
    ValidationError,
)

__all__ = [
    "Response",
    "error_for",
    "is_budget_refusal",
    "rate_headers",
    "retry_after_seconds",
    "server_time",
]

_RATE_BODY = re.compile(rb"rate.?limit|limit exceeded|too many requests", re.IGNORECASE)

Headers = Mapping[str, str] | CIMultiDictProxy[str] | CIMultiDict[str]


@attrs.frozen
class Response:
    """A response as the layers above see it: the final URL, status, headers and body."""

    status: int
    headers: CIMultiDictProxy[str] | CIMultiDict[str]
    body: bytes
    url: str
    method: str


def _case_insensitive(headers: Headers) -> CIMultiDict[str] | CIMultiDictProxy[str]:
    if isinstance(headers, (CIMultiDict, CIMultiDictProxy)):
        return headers
    return CIMultiDict(headers)


def _header_int(headers: CIMultiDict[str] | CIMultiDictProxy[str], name: str) -> int | None:
    """A header's count (int() ignores surrounding blanks), or None: missing or no count."""
    try:
        return int(headers[name])
    except (KeyError, ValueError):
        return None


#: The largest count a rate header may carry: PostgreSQL's `int`, the narrowest integer a
#: budget store keeps it in (SQLite's is 2^63 - 1, Redis's a 64-bit integer).
MAX_RATE_COUNT = 2**31 - 1


def rate_headers(headers: Headers) -> tuple[int | None, int | None]:
    """(`X-RateLimit-Limit`, `X-RateLimit-Remaining`), case-insensitive; a value that is no
    count, or one larger than any store holds, is unknown (a proxy's garbage must not stop
    the budget)."""
    ci = headers if headers.__class__ is CIMultiDictProxy else _case_insensitive(headers)
    limit = _header_int(ci, "X-RateLimit-Limit")
    remaining = _header_int(ci, "X-RateLimit-Remaining")
    return (
        limit if limit is not None and 0 < limit <= MAX_RATE_COUNT else None,
        remaining if remaining is not None and 0 <= remaining <= MAX_RATE_COUNT else None,
    )


def retry_after_seconds(headers: Headers) -> float | None:
    """`Retry-After` in seconds (a number; the HTTP-date form is not used by the service)."""
    raw = _case_insensitive(headers).get("Retry-After")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        return None
    return max(0.0, seconds) if seconds == seconds else None  # NaN is no time


def server_time(headers: Headers) -> float | None:
    """The server's clock (Unix seconds, whole) from the `Date` header, or None."""
    raw = _case_insensitive(headers).get("Date")
    if not raw:
        return None
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None  # "-0000": no zone given, so no point in time
    return when.timestamp()


def is_budget_refusal(status: int, headers: Headers, body: bytes) -> bool:
    """A 403 that means "hourly budget spent", told apart from other refusals."""
    if status != 403:
        return False
    remaining = _header_int(_case_insensitive(headers), "X-RateLimit-Remaining")
    if remaining is not None:
        return remaining <= 0  # the header decides when the server sent it
    return bool(_RATE_BODY.search(body[:2000]))


_STATUS_ERRORS: dict[int, tuple[type[HTTPStatusError], str]] = {
    401: (AuthenticationError, "authorization required: no or wrong credentials"),
    403: (ForbiddenError, "forbidden"),
    404: (NotFoundError, "not found: the entity or action does not exist"),
    406: (NotAcceptableError, "not accepted: the action is not available in the API"),
    501: (NotImplementedByServerError, "not implemented: the action is not available in the API"),
}


def error_for(
    status: int,
    headers: Headers,
    body: bytes,
    *,
    fmt: Format,
    method: str,
    url: str,
    retry_after: float | None = None,
) -> HTTPStatusError | None:
    """The exception a response stands for, or None for 2xx (`retry_after`: the budget's)."""
    if 200 <= status < 300:
        return None

    def make(cls: Callable[..., HTTPStatusError], *args: Any, **kwargs: Any) -> HTTPStatusError:
        return cls(
            *args, status=status, method=method, url=url, headers=headers, body=body, **kwargs
        )

    if status == 422:
        return make(ValidationError, load_field_errors(body, fmt))
    if is_budget_refusal(status, headers, body):
        when = f"; capacity returns in ~{retry_after:.0f}s" if retry_after is not None else ""
        message = f"hourly request budget spent (the server refused){when}"
        return make(RateLimitExceeded, message, retry_after=retry_after)
    if status in _STATUS_ERRORS:
        return make(*_STATUS_ERRORS[status])
    if status >= 500:
        return make(ServerError, "server error: processing failed on the service side")
    return make(HTTPStatusError, f"unexpected status {status}")
