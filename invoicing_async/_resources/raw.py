"""`with_raw_response`: any operation's HTTP answer beside its model, generated from the
operations themselves: a copy of the resource whose transport records each response."""

from __future__ import annotations

import asyncio
import functools
import inspect
import typing
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from multidict import CIMultiDict, CIMultiDictProxy

from invoicing_async._transport.http import BoundTransport
from invoicing_async._transport.response import Response, rate_headers
from invoicing_async._wire.json import decode_json

__all__ = ["APIResponse", "RawOperations", "RecordingTransport", "operations_of"]

T = TypeVar("T")
Target = TypeVar("Target")


class APIResponse(Generic[T]):
    """An operation's HTTP answer and its result: ``raw.status_code``, ``raw.headers``,
    ``raw.rate_limit_remaining``, and ``raw.parse()`` for the model the operation returns.

    An operation that needed more than one request (a create answered without a body is
    read again; `sync_fetch_ids` sends 100 ids a request) describes its last response, the
    one with the freshest rate-limit counters; `requests` says how many calls it made.
    `content` is that response's body; `json()` reads it as JSON. From `client.request`,
    ``parse()`` gives the body as plain data (decoded when first asked for).
    """

    __slots__ = (
        "_decode",
        "_result",
        "content",
        "elapsed",
        "headers",
        "method",
        "requests",
        "status_code",
        "url",
    )

    def __init__(
        self,
        response: Response,
        *,
        elapsed: float,
        requests: int,
        result: T | None = None,
        decode: Callable[[bytes], T] | None = None,
    ) -> None:
        self.status_code: int = response.status
        #: The body as received (empty for a HEAD or a 204).
        self.content: bytes = response.body
        #: The response headers, case-insensitive (`raw.headers["X-RateLimit-Remaining"]`).
        self.headers: CIMultiDictProxy[str] | CIMultiDict[str] = response.headers
        self.url: str = response.url
        self.method: str = response.method
        #: Seconds spent on the operation's requests: budget wait, retries and backoff included.
        self.elapsed: float = elapsed
        #: Calls the operation made to the service (a retried call counts once).
        self.requests: int = requests
        self._result = result
        self._decode = decode

    @property
    def rate_limit(self) -> int | None:
        """`X-RateLimit-Limit` as a number (None when absent or not a count)."""
        return rate_headers(self.headers)[0]

    @property
    def rate_limit_remaining(self) -> int | None:
        """`X-RateLimit-Remaining` as a number (None when absent or not a count)."""
        return rate_headers(self.headers)[1]

    @property
    def text(self) -> str:
        """The body as text (UTF-8; a byte that is not becomes U+FFFD)."""
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body read as JSON (decimals exact; `DecodeError` for a body that is not)."""
        return decode_json(self.content)

    def parse(self) -> T:
        """The operation's usual result: the model (or list, or None) it returns; from
        `client.request`, the body as plain data in the client's format."""
        if self._decode is not None:
            self._result, self._decode = self._decode(self.content), None
        return typing.cast(T, self._result)

    def __repr__(self) -> str:
        return f"<APIResponse [{self.status_code}] {self.method} {self.url}>"


class RecordingTransport(BoundTransport):
    """A bound transport that keeps the last response and the time its requests took."""

    def __init__(self, bound: BoundTransport) -> None:
        super().__init__(bound.transport, bound.options)
        self.last: Response | None = None
        self.elapsed = 0.0
        self.requests = 0

    async def request(
        self, method: str, path: str, *, body: bytes | None = None, idempotent: bool = False
    ) -> Response:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            response = await super().request(method, path, body=body, idempotent=idempotent)
        finally:
            self.elapsed += loop.time() - started
        self.last = response
        self.requests += 1
        return response


def operations_of(cls: type) -> frozenset[str]:
    """The public coroutine methods of `cls`: its operations, each one or more requests.
    (`iter` streams the answer of `list` and is not among them.)"""
    return _operations(cls)


@functools.cache
def _operations(cls: type) -> frozenset[str]:
    return frozenset(
        name
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    )


class RawOperations(Generic[Target]):
    """``target.with_raw_response``: each operation of the target, returning an
    `APIResponse` instead of the result. Built from the operations, one wrapper each."""

    __slots__ = ("_bound", "_names", "_rewire")

    def __init__(
        self,
        bound: BoundTransport,
        rewire: Callable[[BoundTransport], Target],
        names: frozenset[str],
    ) -> None:
        self._bound = bound
        self._rewire = rewire
        self._names = names

    def __dir__(self) -> list[str]:
        return sorted(self._names)

    def __getattr__(self, name: str) -> Callable[..., Coroutine[Any, Any, APIResponse[Any]]]:
        """An operation of the target, by name (typed loosely: see its method)."""
        if name not in self._names:
            raise AttributeError(f"no operation {name!r} with a raw response")
        return self._wrap(name)

    def _wrap(self, name: str) -> Callable[..., Coroutine[Any, Any, APIResponse[Any]]]:
        bound, rewire = self._bound, self._rewire

        async def raw(*args: Any, **kwargs: Any) -> APIResponse[Any]:
            recorder = RecordingTransport(bound)
            result = await getattr(rewire(recorder), name)(*args, **kwargs)
            if recorder.last is None:  # an operation that sent nothing (no ids to fetch)
                raise ValueError(f"{name}: nothing was sent, so there is no response")
            return APIResponse(
                recorder.last, elapsed=recorder.elapsed, requests=recorder.requests, result=result
            )

        raw.__name__ = raw.__qualname__ = name
        return raw
