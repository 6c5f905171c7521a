"""The API in memory: scripted replies through `MockSender`, for operation tests.

The same `reply(method, path, …)` / `seen` interface as the loopback `ScriptedServer`,
without sockets: everything but the I/O (auth, budget, retries, redirects, error mapping,
decoding) runs for real.
"""

from __future__ import annotations

from collections import defaultdict

import attrs

import invoicing_async as ia
from invoicing_async.testing import MockSender, OutgoingRequest, RawResponse, mock_response

BASE_URL = "https://acme.example.com"


@attrs.frozen
class SeenRequest:
    method: str
    path: str  # decoded, as a server's router sees it
    raw_path: str  # as sent, escapes kept
    query: str
    headers: dict[str, str]
    body: bytes


class MemoryAPI:
    """Answers each request with the next reply scripted for its (method, decoded path)."""

    def __init__(self) -> None:
        self.seen: list[SeenRequest] = []
        self._replies: dict[tuple[str, str], list[RawResponse]] = defaultdict(list)
        self.sender = MockSender(self._handle)

    def reply(
        self,
        method: str,
        path: str,
        status: int = 200,
        body: bytes | str = b"",
        headers: dict[str, str] | None = None,
        *,
        times: int = 1,
    ) -> None:
        for _ in range(times):
            self._replies[(method, path)].append(mock_response(status, body, headers))

    def _handle(self, request: OutgoingRequest) -> RawResponse:
        url = request.url
        self.seen.append(
            SeenRequest(
                method=request.method,
                path=url.path,
                raw_path=url.raw_path,
                query=url.query_string,
                headers=dict(request.headers),
                body=request.body or b"",
            )
        )
        queue = self._replies.get((request.method, url.path))
        return queue.pop(0) if queue else mock_response(404, b"no script")


def memory_client(api: MemoryAPI, fmt: str = "xml", **kwargs: object) -> ia.InvoicingClient:
    """A client of the in-memory API with no retry sleeps and a budget that never binds."""
    kwargs.setdefault("budget", ia.RateBudget(limit=100_000))
    kwargs.setdefault("retry", ia.RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0))
    kwargs.setdefault("auth", ia.BasicAuth("api-user", "s3cret-pw"))
    return ia.InvoicingClient(
        BASE_URL,
        format=fmt,  # type: ignore[arg-type]
        sender=api.sender,
        **kwargs,  # type: ignore[arg-type]
    )
