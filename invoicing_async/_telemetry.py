"""OpenTelemetry, when the `[otel]` extra is installed and a tracer or meter provider is
configured (looked up at most once a second until one is); otherwise each hook is a no-op."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from invoicing_async._version import __version__

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram, Meter
    from opentelemetry.trace import Span, Tracer

__all__ = ["SCOPE", "configured", "forget", "histogram", "span", "tracer"]

#: The instrumentation scope: the name our tracer and meter are known by.
SCOPE = "invoicing_async"

_NO_SPAN: AbstractContextManager[None] = contextlib.nullcontext()
_instruments: dict[tuple[int, str], Any] = {}
_found = False  # a provider was configured (a provider, once set, stays)


@functools.cache
def _opentelemetry() -> Any:
    """opentelemetry's `trace` and `metrics` modules, imported on first use; None when the
    extra is not installed (then never tried again)."""
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        return None
    return trace, metrics


def configured() -> bool:
    """True when OpenTelemetry is installed and a tracer or meter provider was set (asked
    when a client is made and when a sync run starts, never per request)."""
    global _found
    if _found:
        return True
    api = _opentelemetry()
    if api is None:
        return False
    trace, metrics = api
    tracers = trace.get_tracer_provider()
    if not isinstance(tracers, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        _found = True
        return True
    meters = metrics.get_meter_provider()
    # Unset, the API hands out a private proxy that drops everything until one is set.
    _found = not (
        isinstance(meters, metrics.NoOpMeterProvider)
        or type(meters).__name__ == "_ProxyMeterProvider"
    )
    return _found


def forget() -> None:
    """Look the providers up again at the next use (tests that set and unset them)."""
    global _found
    _found = False
    _instruments.clear()


def tracer() -> Tracer:
    """Our tracer from the current provider (call only when `configured()`)."""
    trace = _opentelemetry()[0]
    provider = trace.get_tracer_provider()
    key = (id(provider), "tracer")
    found = _instruments.get(key)
    if found is None:
        found = _instruments[key] = provider.get_tracer(SCOPE, __version__)
    return found  # type: ignore[no-any-return]


def histogram(name: str, unit: str, description: str, buckets: tuple[float, ...]) -> Histogram:
    """A histogram of the current meter provider, made once per provider."""
    metrics = _opentelemetry()[1]
    provider = metrics.get_meter_provider()
    key = (id(provider), name)
    found = _instruments.get(key)
    if found is None:
        meter: Meter = provider.get_meter(SCOPE, __version__)
        found = _instruments[key] = meter.create_histogram(
            name, unit=unit, description=description, explicit_bucket_boundaries_advisory=buckets
        )
    return found


def span(
    name: str, attributes: Mapping[str, str | int | float | bool] | None = None
) -> AbstractContextManager[Span | None]:
    """A span made current for the block (None inside when OpenTelemetry is off)."""
    if not configured():
        return _NO_SPAN
    return tracer().start_as_current_span(name, attributes=attributes)
