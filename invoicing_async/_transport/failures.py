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
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        connected = not isinstance(exc, aiohttp.ConnectionTimeoutError)
        error: APIConnectionError = APITimeoutError(
            f"{where} timed out ({describe_timeout(timeout)})", method=method, url=str(url)
        )
        error.__cause__ = exc
        return SendError(error, connected=connected)
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        error = APIConnectionError(
            f"{where}: TLS certificate not trusted: {exc.certificate_error}",
            method=method,
            url=str(url),
        )
        error.__cause__ = exc
        # Retrying cannot fix a certificate.
        return SendError(error, connected=True, retryable=False)
    if isinstance(exc, aiohttp.ClientResponseError):
        # Carries request_info (headers, Authorization included): keep only its words.
        detail = f"{type(exc).__name__}: {exc.status} {exc.message}".strip()
        error = APIConnectionError(
            f"{where}: connection failed: {detail}", method=method, url=str(url)
        )
        return SendError(error, connected=True)
    connected = not isinstance(exc, aiohttp.ClientConnectorError)
    error = APIConnectionError(
        f"{where}: connection failed: {type(exc).__name__}: {exc}", method=method, url=str(url)
    )
    error.__cause__ = exc
    return SendError(error, connected=connected)
