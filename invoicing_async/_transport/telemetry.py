"""Requests in OpenTelemetry: a CLIENT span per API call (HTTP client semantic conventions;
budget waits, retries and redirects as span events) and the standard
`http.client.request.duration` histogram per request sent. The transport decides when it
is built: without a configured provider nothing here runs."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from invoicing_async import _telemetry
from invoicing_async._transport.failures import SendError
from invoicing_async._transport.sender import OutgoingRequest, RawResponse, Sender

if TYPE_CHECKING:
    from opentelemetry.trace import Span
    from yarl import URL

    from invoicing_async._transport.response import Response

__all__ = ["TracedSender", "traced_request"]

#: The semantic conventions' advised buckets for HTTP request durations, in seconds.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
#: A wait shorter than this before the first send is not a budget wait worth an event.
_WAIT_WORTH_TELLING = 0.001


class Traceable(Protocol):
    """What a traced call needs of the transport (`HTTPTransport`): its URLs, and the call
    without its span."""

    def url_for(self, path: str) -> URL: ...

    @property
    def untraced_request(self) -> Callable[..., Awaitable[Response]]: ...


@attrs.define
class _Call:
    """The traced call in progress in this context: its span and its sends so far."""

    span: Span
    last: float  # when the call started, then when its latest send ended
    sends: int = 0
    last_status: int | None = None
    last_error: str | None = None
    budget_wait: float = 0.0  # seconds the budget held the first send back

    def note_budget_wait(self, seconds: float) -> None:
        """The budget refused this call's first unit and granted it `seconds` later."""
        if self.sends == 0:
            self.budget_wait += seconds


def current_call() -> _Call | None:
    """The traced call in progress in this context, if any (None without tracing)."""
    return _CALL.get()


_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "invoicing_async_traced_call", default=None
)


def _server(url: URL) -> dict[str, str | int]:
    found: dict[str, str | int] = {"server.address": str(url.host), "url.scheme": url.scheme}
    if url.port is not None:
        found["server.port"] = url.port
    return found


async def traced_request(transport: Traceable, method: str, path: str, **call: Any) -> Response:
    """`transport.request(method, path, **call)` inside a CLIENT span of its own."""
    from opentelemetry.trace import SpanKind, StatusCode

    url = transport.url_for(path)  # the base URL never holds credentials (validated)
    attributes: dict[str, str | int] = {
        "http.request.method": method,
        "url.full": str(url),
        **_server(url),
    }
    with _telemetry.tracer().start_as_current_span(
        method, kind=SpanKind.CLIENT, attributes=attributes, set_status_on_exception=False
    ) as span:
        state = _Call(span, time.monotonic())
        token = _CALL.set(state)
        try:
            response = await transport.untraced_request(method, path, **call)
        except Exception as exc:
            status = getattr(exc, "status", None)
            if isinstance(status, int):
                span.set_attribute("http.response.status_code", status)
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(StatusCode.ERROR, type(exc).__qualname__)
            raise
        finally:
            _CALL.reset(token)
            if state.sends > 1:
                span.set_attribute("http.request.resend_count", state.sends - 1)
        span.set_attribute("http.response.status_code", response.status)
        return response


@attrs.define
class TracedSender:
    """A `Sender` that records each HTTP request's duration and tells the traced call in
    this context what happened before the send (see the module's docstring)."""

    inner: Sender

    def open(self) -> None:
        self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def send(self, request: OutgoingRequest) -> RawResponse:
        call = _CALL.get()
        started = time.monotonic()
        if call is not None:
            _before_send(call, started)
        try:
            raw = await self.inner.send(request)
        except SendError as failure:
            error = type(failure.error).__qualname__
            self._record(request, started, None, error, call)
            raise
        self._record(request, started, raw.status, None, call)
        return raw

    @staticmethod
    def _record(
        request: OutgoingRequest,
        started: float,
        status: int | None,
        error: str | None,
        call: _Call | None,
    ) -> None:
        ended = time.monotonic()
        attributes: dict[str, str | int] = {
            "http.request.method": request.method,
            **_server(request.url),
        }
        if status is not None:
            attributes["http.response.status_code"] = status
            if status >= 400:
                error = str(status)
        if error is not None:
            attributes["error.type"] = error
        _telemetry.histogram(
            "http.client.request.duration",
            "s",
            "Duration of HTTP client requests.",
            DURATION_BUCKETS,
        ).record(ended - started, attributes)
        if call is not None:
            call.sends += 1
            call.last, call.last_status, call.last_error = ended, status, error


def _before_send(call: _Call, now: float) -> None:
    if call.sends == 0:
        # The budget's own wait, not the call's time before its send (a busy loop is no wait).
        if call.budget_wait >= _WAIT_WORTH_TELLING:
            attributes = {"invoicing.wait.seconds": call.budget_wait}
            call.span.add_event("invoicing.budget.wait", attributes)
        return
    waited = now - call.last
    if call.last_status is not None and 300 <= call.last_status < 400:
        call.span.add_event("http.redirect", {"http.response.status_code": call.last_status})
        return
    after: dict[str, str | int | float] = {
        "http.request.resend_count": call.sends,
        "invoicing.wait.seconds": waited,
    }
    if call.last_status is not None:
        after["http.response.status_code"] = call.last_status
    if call.last_error is not None:
        after["error.type"] = call.last_error
    call.span.add_event("http.retry", after)
