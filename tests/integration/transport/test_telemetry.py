"""OpenTelemetry (issue #26, item 4): spans of requests, sync runs and batches, and the
`http.client.request.duration` histogram, exported in memory by the SDK; and nothing at
all without the extra."""

from __future__ import annotations

import base64
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import invoicing_async as ia
from invoicing_async import _telemetry
from invoicing_async._transport.telemetry import DURATION_BUCKETS, TracedSender
from invoicing_async.errors import ServerError
from invoicing_async.sync import MemoryStore, SyncEngine
from invoicing_async.testing import FakeInvoicingService

ROOT = Path(__file__).parents[3]


class Exported:
    def __init__(self, spans: InMemorySpanExporter, metrics: InMemoryMetricReader) -> None:
        self._spans = spans
        self._metrics = metrics

    def spans(self) -> list[ReadableSpan]:
        return list(self._spans.get_finished_spans())

    def metrics_text(self) -> str:
        """Every metric point's attributes, as one text ("" before any was recorded)."""
        data = self._metrics.get_metrics_data()
        if data is None:
            return ""
        return repr(
            [
                dict(point.attributes or {})
                for resource in data.resource_metrics
                for scope in resource.scope_metrics
                for metric in scope.metrics
                for point in metric.data.data_points
            ]
        )

    def durations(self) -> list[HistogramDataPoint]:
        data = self._metrics.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == "http.client.request.duration"
            for point in metric.data.data_points
            if isinstance(point, HistogramDataPoint)
        ]


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[Exported]:
    """SDK providers with in-memory exporters as the global ones, for this test only (the
    API sets its globals once per process; the test puts the old ones back)."""
    spans = InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    monkeypatch.setattr("opentelemetry.trace._TRACER_PROVIDER", tracers)
    monkeypatch.setattr("opentelemetry.metrics._internal._METER_PROVIDER", meters)
    _telemetry.forget()
    yield Exported(spans, reader)
    tracers.shutdown()
    meters.shutdown()
    monkeypatch.undo()
    _telemetry.forget()


def by_name(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


async def test_a_sync_run_is_a_span_with_its_batches_and_their_requests(
    exported: Exported,
) -> None:
    async with FakeInvoicingService(tls=False, invoices=250, seed=3) as service:
        base_url = service.base_url.rstrip("/")
        async with service.client(format="json") as client:
            report = await SyncEngine(client, MemoryStore(), concurrency=2).run()
    assert (report.created, report.requests) == (250, 4)
    spans = exported.spans()
    (run,) = by_name(spans, "invoicing.sync")
    batches = by_name(spans, "invoicing.sync.batch")
    requests = by_name(spans, "GET") + by_name(spans, "POST")
    assert (len(batches), len(requests)) == (3, 4)
    assert run.parent is None
    assert run.attributes is not None
    assert (
        run.attributes["invoicing.sync.created"],
        run.attributes["invoicing.sync.requests"],
    ) == (
        250,
        4,
    )
    assert all(b.parent is not None and b.parent.span_id == run.context.span_id for b in batches)
    assert sorted(
        int(str(b.attributes["invoicing.batch.size"])) for b in batches if b.attributes
    ) == [
        50,
        100,
        100,
    ]
    # The sync list (GET) is the run's own request; each fetch (POST) belongs to its batch.
    parents = sorted(
        (r.name, "run" if r.parent.span_id == run.context.span_id else "batch")
        for r in requests
        if r.parent is not None
    )
    assert parents == [("GET", "run"), ("POST", "batch"), ("POST", "batch"), ("POST", "batch")]
    batch_ids = {b.context.span_id for b in batches}
    assert {
        r.parent.span_id for r in requests if r.parent and r.parent.span_id != run.context.span_id
    } == batch_ids
    host, port = base_url.split("//")[1].split(":")
    listing = next(r for r in requests if r.parent and r.parent.span_id == run.context.span_id)
    assert listing.kind is SpanKind.CLIENT
    assert dict(listing.attributes or {}) == {
        "http.request.method": "GET",
        "url.full": f"{base_url}/api/v1.0/invoices/sync_list_ids.xml",
        "server.address": host,
        "server.port": int(port),
        "url.scheme": "http",
        "http.response.status_code": 200,
    }
    assert listing.events == ()  # no wait, no retry
    points = exported.durations()
    assert sum(p.count for p in points) == 4
    assert {p.attributes["http.response.status_code"] for p in points if p.attributes} == {200}
    assert all(tuple(p.explicit_bounds) == DURATION_BUCKETS for p in points)


async def test_a_retried_request_and_a_budget_wait_are_span_events(exported: Exported) -> None:
    async with FakeInvoicingService(tls=False, invoices=1) as service:
        faults = service.account.faults
        faults.error_rate = 1.0

        def heal(event: ia.RequestEvent) -> None:
            faults.error_rate = 0.0  # the first attempt fails, the retry succeeds

        retry = ia.RetryPolicy(attempts=3, base_delay=0.01, jitter=False)
        budget = ia.RateBudget(limit=1, period=0.3)
        async with service.client(retry=retry, budget=budget, on_request=heal) as client:
            await client.invoices.list()  # 500, then 200 after the unit comes back
        faults.error_rate = 1.0
        async with service.client(retry=ia.RetryPolicy(attempts=2, base_delay=0.01)) as client:
            with pytest.raises(ServerError):
                await client.invoices.list()
    retried, failed = exported.spans()
    assert [e.name for e in retried.events] == ["http.retry"]
    (event,) = retried.events
    assert event.attributes is not None
    assert event.attributes["http.request.resend_count"] == 1
    assert event.attributes["http.response.status_code"] == 500
    assert event.attributes["error.type"] == "500"
    # The retry waited for the budget's one unit to come back (0.3 s), not only the backoff.
    assert float(str(event.attributes["invoicing.wait.seconds"])) > 0.2
    assert retried.attributes is not None
    assert retried.attributes["http.request.resend_count"] == 1
    assert retried.attributes["http.response.status_code"] == 200
    assert retried.status.status_code is StatusCode.UNSET
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "ServerError"
    assert failed.attributes["http.response.status_code"] == 500
    assert failed.status.status_code is StatusCode.ERROR
    codes = sorted(
        int(str(p.attributes["http.response.status_code"]))
        for p in exported.durations()
        if p.attributes
    )
    assert codes == [200, 500]  # one point per status: 3 requests of 500, 1 of 200


async def test_a_first_send_that_waits_for_the_budget_tells_it(exported: Exported) -> None:
    async with FakeInvoicingService(tls=False, invoices=1) as service:
        budget = ia.RateBudget(limit=1, period=0.3)
        async with service.client(budget=budget) as client:
            await client.invoices.list()
            await client.invoices.list()
    first, second = exported.spans()
    # The first call did not wait for the budget (a busy machine may still put a
    # millisecond or two between its start and its send, which is reported as such).
    assert all(
        e.attributes is not None and float(str(e.attributes["invoicing.wait.seconds"])) < 0.2
        for e in first.events
    )
    (wait,) = second.events
    assert wait.name == "invoicing.budget.wait"
    assert wait.attributes is not None
    assert float(str(wait.attributes["invoicing.wait.seconds"])) > 0.2  # the unit's 0.3 s


def test_without_opentelemetry_nothing_is_imported_and_nothing_changes(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import asyncio, sys
        sys.modules["opentelemetry"] = None  # not installed, as far as imports go
        from invoicing_async.sync import MemoryStore, SyncEngine
        from invoicing_async.testing import FakeInvoicingService

        async def main():
            async with FakeInvoicingService(tls=False, invoices=150) as service:
                async with service.client() as client:
                    report = await SyncEngine(client, MemoryStore()).run()
            print(report.created, report.requests)

        asyncio.run(main())
        loaded = sorted(m for m, v in sys.modules.items() if m.startswith("opentelemetry") and v)
        print(loaded)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["150 3", "[]"]


def test_with_the_api_but_no_provider_no_span_is_made() -> None:
    _telemetry.forget()
    assert not _telemetry.configured()
    with _telemetry.span("x") as span:
        assert span is None


def span_text(spans: list[ReadableSpan]) -> str:
    """Everything a span exporter would send of these spans, as one text."""
    parts: list[str] = []
    for s in spans:
        parts += [s.name, str(s.status.description), repr(dict(s.attributes or {}))]
        parts += [f"{e.name} {dict(e.attributes or {})!r}" for e in s.events]
        parts += [repr(dict(s.resource.attributes))]
    return "\n".join(parts)


async def test_no_credential_reaches_a_span_an_event_or_a_metric(exported: Exported) -> None:
    """Basic and OAuth 1 calls, a refused password, a retried 500 and a sync run: neither
    a secret nor an Authorization header value is in any span, event (the recorded
    exceptions included) or metric point."""
    async with FakeInvoicingService(tls=False, invoices=120, seed=5, oauth1=True) as service:
        oauth = service.oauth1_auth
        wrong = ia.BasicAuth(service.username, f"wrong-{service.password}")
        secrets = [service.password, wrong.password, oauth.consumer_secret, oauth.token_secret]
        secrets += [
            base64.b64encode(f"{service.username}:{password}".encode()).decode()
            for password in (service.password, wrong.password)
        ]
        async with service.client(format="json") as client:
            await SyncEngine(client, MemoryStore(), concurrency=2).run()
        async with service.client(auth=wrong) as client:
            with pytest.raises(ia.AuthenticationError):
                await client.invoices.list()
        service.account.faults.error_rate = 1.0
        retry = ia.RetryPolicy(attempts=2, base_delay=0.01, jitter=False)
        async with service.client(auth=oauth, retry=retry) as client:
            with pytest.raises(ServerError):
                await client.invoices.list()
    spans = exported.spans()
    assert {s.name for s in spans} >= {"invoicing.sync", "GET", "POST"}
    assert any(e.name == "exception" for s in spans for e in s.events)  # messages recorded
    text = span_text(spans) + repr([dict(p.attributes or {}) for p in exported.durations()])
    for secret in secrets:
        assert secret not in text
    assert "oauth_signature" not in text
    assert "Basic " not in text
    assert "@" not in "".join(str((s.attributes or {}).get("url.full", "")) for s in spans)


async def test_tracing_is_decided_when_the_client_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client made before the provider is set stays untraced; one made after wraps its
    sender at once and makes one span a call (the span's call runs the untraced path: the
    request is not entered twice)."""
    _telemetry.forget()
    service = FakeInvoicingService(invoices=2)
    async with service, service.client(format="json") as before:
        with pytest.MonkeyPatch.context() as patch:
            spans = InMemorySpanExporter()
            tracers = TracerProvider()
            tracers.add_span_processor(SimpleSpanProcessor(spans))
            patch.setattr("opentelemetry.trace._TRACER_PROVIDER", tracers)
            async with service.client(format="json") as after:
                transport = after._transport  # noqa: SLF001 - what the decision made
                assert transport.traced
                assert isinstance(transport.sender, TracedSender)
                entered: list[str] = []
                untraced = transport.untraced_request

                def counting(*args: object, **kwargs: object) -> object:
                    entered.append("untraced")
                    return untraced(*args, **kwargs)  # type: ignore[arg-type]

                monkeypatch.setattr(transport, "untraced_request", counting)
                await after.invoices.get(1)
                await before.invoices.get(1)
                assert not before._transport.traced  # noqa: SLF001
            tracers.shutdown()
        _telemetry.forget()
    assert entered == ["untraced"]
    assert [s.name for s in spans.get_finished_spans()] == ["GET"]
