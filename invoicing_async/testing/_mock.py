"""`MockSender`: answer a client's requests from a function, in memory (as httpx's
`MockTransport`); everything but the socket runs for real."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping

from multidict import CIMultiDict

from invoicing_async._transport.sender import OutgoingRequest, RawResponse

__all__ = ["MockSender", "mock_response"]

Handler = Callable[[OutgoingRequest], "RawResponse | Awaitable[RawResponse]"]


def mock_response(
    status: int = 200, body: bytes | str = b"", headers: Mapping[str, str] | None = None
) -> RawResponse:
    """A response for a `MockSender` handler to return."""
    raw = body.encode() if isinstance(body, str) else body
    return RawResponse(status=status, headers=CIMultiDict(headers or {}), body=raw)


class MockSender:
    """Sends nothing: calls `handler(request)` (which may raise `SendError`) and returns its
    response; `requests` keeps every request sent, in order."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[OutgoingRequest] = []
        self.closed = False

    def open(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True

    async def send(self, request: OutgoingRequest) -> RawResponse:
        self.requests.append(request)
        result = self.handler(request)
        if inspect.isawaitable(result):
            return await result
        return result
