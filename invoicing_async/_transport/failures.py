"""From an aiohttp exception to the error callers see (pure): what failed and whether a
connection was opened; the cause is dropped when its repr carries the request's headers."""

from __future__ import annotations

import asyncio

import aiohttp
from yarl import URL

from invoicing_async.errors import APIConnectionError, APITimeoutError

__all__ = ["SendError", "connection_failure", "describe_timeout"]


class SendError(Exception):
    """A request that got no response: the error to raise, and whether it connected."""

    def __init__(self, error: APIConnectionError, *, connected: bool, retryable: bool = True):
        super().__init__(str(error))
        self.error = error
        self.connected = connected
        self.retryable = retryable


def describe_timeout(timeout: aiohttp.ClientTimeout) -> str:
    parts = []
    if timeout.connect is not None:
        parts.append(f"connect {timeout.connect:g}s")
    if timeout.total is not None:
        parts.append(f"total {timeout.total:g}s")
    return ", ".join(parts) or "no timeout set"


def connection_failure(
    exc: BaseException, method: str, url: URL, timeout: aiohttp.ClientTimeout
) -> SendError:
    """The `SendError` for an exception raised while sending `method url`."""
    where = f"{method} {url}"
    cause: BaseException | None = exc  # kept as the error's cause unless it leaks headers
    connected, retryable = not isinstance(exc, aiohttp.ClientConnectorError), True
    cls: type[APIConnectionError] = APIConnectionError
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        cls, text = APITimeoutError, f"{where} timed out ({describe_timeout(timeout)})"
        connected = not isinstance(exc, aiohttp.ConnectionTimeoutError)
    elif isinstance(exc, aiohttp.ClientConnectorCertificateError):
        text = f"{where}: TLS certificate not trusted: {exc.certificate_error}"
        connected, retryable = True, False  # retrying cannot fix a certificate
    elif isinstance(exc, aiohttp.ClientResponseError):
        # Carries request_info (headers, Authorization included): keep only its words.
        detail = f"{type(exc).__name__}: {exc.status} {exc.message}".strip()
        text, connected, cause = f"{where}: connection failed: {detail}", True, None
    else:
        text = f"{where}: connection failed: {type(exc).__name__}: {exc}"
    error = cls(text, method=method, url=str(url))
    error.__cause__ = cause
    return SendError(error, connected=connected, retryable=retryable)
