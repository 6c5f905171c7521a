"""`StrictRoutes`: declared answers over `MockSender`, as respx and pytest-httpx give them:
a request no route matches fails the test, and a route never called fails it at the end."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from yarl import URL

from invoicing_async._client import InvoicingClient
from invoicing_async._models.base import Model
from invoicing_async._models.payloads import Format, dump_model
from invoicing_async._transport.auth import BasicAuth
from invoicing_async._transport.sender import OutgoingRequest, RawResponse
from invoicing_async.testing._mock import MockSender, mock_response
from invoicing_async.testing._writers import dump_list

__all__ = ["BASE_URL", "Call", "Route", "StrictRoutes", "UnexpectedRequest"]

BASE_URL = "https://acme.example.com"  # where the routed API "is": nothing listens there
API_PREFIX = "/api/v1.0"
EXTENSIONS = (".xml", ".json")

BodyMatcher = bytes | str | Callable[[bytes], bool]
Answer = RawResponse | Callable[[OutgoingRequest], RawResponse]


class UnexpectedRequest(AssertionError):
    """A request that no declared route matches (also raised into the client's call)."""


def describe(request: OutgoingRequest) -> str:
    """A request as a failure shows it: method, URL, the body's first bytes."""
    body = request.body or b""
    shown = body[:300].decode("utf-8", "replace") + ("…" if len(body) > 300 else "")
    return f"{request.method} {request.url}" + (f"\n    body: {shown}" if body else "")


def _api_path(url: URL) -> str:
    path = url.path
    return path[len(API_PREFIX) :] if path.startswith(API_PREFIX) else path


def _format_of(request: OutgoingRequest) -> Format:
    return "json" if "json" in request.headers.get("Accept", "") else "xml"


@attrs.frozen
class Call:
    """One request a route answered, and the answer."""

    request: OutgoingRequest
    response: RawResponse
    route: Route = attrs.field(repr=False)


@attrs.define(eq=False)
class Route:
    """Requests of one method to one path (under `/api/v1.0`; without an extension it matches
    either format's), optionally only those with these query `params` and this `body`."""

    method: str
    path: str
    params: Mapping[str, str] | None = None
    body: BodyMatcher | None = None
    answers: list[Answer] = attrs.field(factory=list)
    calls: list[Call] = attrs.field(factory=list)

    @property
    def called(self) -> bool:
        return bool(self.calls)

    @property
    def call_count(self) -> int:
        return len(self.calls)

    def respond(
        self,
        status: int = 200,
        body: bytes | str = b"",
        *,
        model: Model | Sequence[Model] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Route:
        """Answer with this response; a `model` (or a list of them) is written in the
        request's format as the service writes it. Several `respond`s answer in turn,
        the last one from then on."""

        def answer(request: OutgoingRequest) -> RawResponse:
            fmt = _format_of(request)
            payload: bytes | str = body
            if isinstance(model, Model):
                payload = dump_model(model, fmt, mode="document")
            elif model is not None:
                payload = dump_list(list(model), fmt, type(model[0])) if model else b"[]"
            content = "application/json" if fmt == "json" else "application/xml"
            return mock_response(status, payload, {"Content-Type": content, **(headers or {})})

        self.answers.append(answer)
        return self

    def side_effect(self, handler: Callable[[OutgoingRequest], RawResponse]) -> Route:
        """Answer with `handler(request)`, which may also raise `SendError`."""
        self.answers.append(handler)
        return self

    def matches(self, request: OutgoingRequest) -> bool:
        if request.method.upper() != self.method.upper():
            return False
        path = _api_path(request.url)
        if path != self.path and not (
            not self.path.endswith(EXTENSIONS) and path in {self.path + e for e in EXTENSIONS}
        ):
            return False
        if self.params is not None and any(
            request.url.query.get(k) != str(v) for k, v in self.params.items()
        ):
            return False
        return self.body is None or _body_matches(self.body, request.body or b"")

    def answer(self, request: OutgoingRequest) -> RawResponse:
        if not self.answers:
            self.respond()
        chosen = self.answers[min(len(self.calls), len(self.answers) - 1)]
        response = chosen(request) if callable(chosen) else chosen
        self.calls.append(Call(request, response, self))
        return response

    def __str__(self) -> str:
        extra = "".join(
            f" {name}={value!r}"
            for name, value in (("params", self.params), ("body", self.body))
            if value is not None
        )
        return f"{self.method.upper()} {self.path}{extra}"


def _body_matches(matcher: BodyMatcher, body: bytes) -> bool:
    if callable(matcher):
        return matcher(body)
    return body == (matcher.encode() if isinstance(matcher, str) else matcher)


class StrictRoutes:
    """Declared routes answering a client in memory (`client()`); `calls` records every
    request answered, in order. A request no route matches raises `UnexpectedRequest` into
    the call and fails `verify()`; so does a route never called, unless
    `assert_all_called` is False."""

    def __init__(self, *, assert_all_called: bool = True, base_url: str = BASE_URL) -> None:
        self.assert_all_called = assert_all_called
        self.base_url = base_url
        self.routes: list[Route] = []
        self.calls: list[Call] = []
        self.unexpected: list[OutgoingRequest] = []
        self.sender = MockSender(self._answer)
        self._clients: list[InvoicingClient] = []

    def route(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: BodyMatcher | None = None,
    ) -> Route:
        """A new route (the first declared that matches a request answers it)."""
        made = Route(method.upper(), path, params=params, body=body)
        self.routes.append(made)
        return made

    def get(self, path: str, **match: Any) -> Route:
        return self.route("GET", path, **match)

    def post(self, path: str, **match: Any) -> Route:
        return self.route("POST", path, **match)

    def put(self, path: str, **match: Any) -> Route:
        return self.route("PUT", path, **match)

    def delete(self, path: str, **match: Any) -> Route:
        return self.route("DELETE", path, **match)

    def client(self, **kwargs: Any) -> InvoicingClient:
        """An `InvoicingClient` answered by these routes (closed with `aclose`); no retries
        unless `retry=` is given, so that one call is one request."""
        from invoicing_async._transport.retry import RetryPolicy

        kwargs.setdefault("auth", BasicAuth("api-user", "secret"))
        kwargs.setdefault("retry", RetryPolicy.none())
        made = InvoicingClient(self.base_url, sender=self.sender, **kwargs)
        self._clients.append(made)
        return made

    async def _answer(self, request: OutgoingRequest) -> RawResponse:
        for candidate in self.routes:
            if candidate.matches(request):
                response = candidate.answer(request)
                self.calls.append(candidate.calls[-1])
                return response
        self.unexpected.append(request)
        raise UnexpectedRequest(f"no route matches the request\n  {describe(request)}")

    def problems(self) -> list[str]:
        """What `verify` fails on: unexpected requests, then routes never called."""
        found = [f"unexpected request: {describe(r)}" for r in self.unexpected]
        if self.assert_all_called:
            found += [f"route never called: {r}" for r in self.routes if not r.called]
        return found

    def verify(self) -> None:
        """Raise `AssertionError` naming every problem (`problems()`)."""
        found = self.problems()
        if found:
            declared = "".join(f"\n  {r} (called {r.call_count}x)" for r in self.routes)
            raise AssertionError(
                "\n".join(found) + (f"\nroutes declared:{declared}" if declared else "")
            )

    async def aclose(self) -> None:
        for made in self._clients:
            await made.aclose()
        self._clients.clear()
