"""A worker's Prometheus metrics and health (`worker --metrics-port`, `[metrics]` extra):
`/healthz` answers 200 while the worker can run jobs and the database answers, else 503."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from aiohttp import web
from yarl import URL

from invoicing_async._account_run import AccountRun, RunObserver, RunOutcome
from invoicing_async._jobs import SQL
from invoicing_async._jobs.tasks import SYNC_TASK, Jobs
from invoicing_async._transport.urls import account_host
from invoicing_async.errors import ConfigurationError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

__all__ = ["MetricsServer", "RunMetrics", "health"]

#: The longest request line or header a scrape may send, and how many headers.
_MAX_LINE = 4096
_MAX_HEADERS = 32
_INSTALL = "worker --metrics-port needs the [metrics] extra: pip install -e '.[metrics]'"
#: Run durations from a cached no-change run (well under a second) to a budget-sized sync.
_DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)
#: Requests left when a run ended: from an exhausted budget to a full default hour and more.
_BUDGET_BUCKETS = (0.0, 5.0, 20.0, 50.0, 100.0, 200.0, 350.0, 1000.0, 5000.0)
#: Seconds past its due time after which an account counts as overdue (as `status --check`).
_OVERDUE_MARGIN = 3600.0


class RunMetrics(RunObserver):
    """The run metrics of one worker, in a registry of their own; every label set is bounded
    (`per_host` adds a gauge per customer host: opt-in, for fleets of few hosts)."""

    def __init__(self, *, per_host: bool = False) -> None:
        try:
            import prometheus_client as p
        except ImportError:
            raise ConfigurationError(_INSTALL) from None
        self.registry: CollectorRegistry = p.CollectorRegistry()
        r = self.registry
        self.runs = p.Counter("invoicing_runs", "Account runs, by outcome", ["outcome"], registry=r)
        self.duration = p.Histogram(
            "invoicing_run_duration_seconds",
            "Duration of account runs",
            ["outcome"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.requests = p.Counter(
            "invoicing_requests", "API requests spent by account runs", registry=r
        )
        self.invoices = p.Counter(
            "invoicing_invoices",
            "Invoices the runs created, updated or deleted in their stores",
            ["change"],
            registry=r,
        )
        self.budget_left = p.Histogram(
            "invoicing_run_budget_remaining",
            "Requests left in the host's hourly budget when a run ended",
            buckets=_BUDGET_BUCKETS,
            registry=r,
        )
        self.budget = None
        if per_host:
            self.budget = p.Gauge(
                "invoicing_budget_remaining",
                "Requests left in a host's hourly budget when its last run ended",
                ["host"],
                registry=r,
            )
        self.overdue = p.Gauge(
            "invoicing_accounts_overdue",
            "Accounts due for longer than the overdue margin and not yet queued",
            registry=r,
        )
        self.queue = p.Gauge(
            "invoicing_queue_jobs",
            "Sync jobs in procrastinate's table, waiting (todo) or running (doing)",
            ["status"],
            registry=r,
        )

    def finished(self, run: AccountRun, outcome: RunOutcome) -> None:
        self.runs.labels(outcome.status).inc()
        self.duration.labels(outcome.status).observe(outcome.seconds)
        self.requests.inc(outcome.requests)
        for change in ("created", "updated", "deleted"):  # the label is the outcome's count
            self.invoices.labels(change).inc(getattr(outcome, change))
        if outcome.budget_left is not None:
            self.budget_left.observe(outcome.budget_left)
            if self.budget is not None:
                self.budget.labels(account_host(URL(run.base_url))).set(outcome.budget_left)

    def exposition(self) -> tuple[bytes, str]:
        """The registry in Prometheus' text format, and its content type; without the
        `_created` samples (a timestamp that reads as a count beside `_total`)."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(_WithoutCreated(self.registry)), CONTENT_TYPE_LATEST


class _WithoutCreated:
    """A registry's families without their `_created` samples (prometheus-client's
    `disable_created_metrics()` would change every registry of the process)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            created = f"{family.name}_created"
            family.samples = [s for s in family.samples if s.name != created]
            yield family


def health(
    heartbeat_age: float,
    stale_after: float,
    database_error: str | None,
    worker_problem: str | None = None,
) -> str | None:
    """Why the worker is unhealthy, or None when it is healthy."""
    if database_error is not None:
        return f"database unreachable: {database_error}"
    if worker_problem is not None:
        return worker_problem
    if heartbeat_age > stale_after:
        return f"heartbeat stale: last {heartbeat_age:.0f}s ago (limit {stale_after:g}s)"
    return None


class MetricsServer:
    """`/metrics` and `/healthz` on `host:port` (port 0: any free port, see `port`)."""

    def __init__(
        self,
        jobs: Jobs,
        metrics: RunMetrics,
        *,
        host: str = "127.0.0.1",
        port: int = 9464,
        query_timeout: float = 2.0,
        connection_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.jobs = jobs
        self.metrics = metrics
        self.host = host
        self.port = port
        self.query_timeout = query_timeout
        self.connection_timeout = connection_timeout
        self._clock = clock
        app = web.Application(client_max_size=_MAX_LINE)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        # A scrape is one short GET: a longer line or header is refused (400), and a
        # body nobody reads is drained for a second at most, then the connection closed.
        self._runner = web.AppRunner(
            app,
            access_log=None,
            max_line_size=_MAX_LINE,
            max_field_size=_MAX_LINE,
            max_headers=_MAX_HEADERS,
            lingering_time=1.0,
        )
        self._reaper: asyncio.Task[None] | None = None

    async def __aenter__(self) -> MetricsServer:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        self._reaper = asyncio.create_task(self._close_old_connections())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        await self._runner.cleanup()

    async def _close_old_connections(self) -> None:
        """Close every connection `connection_timeout` seconds after it was first seen: a slow
        client holds no socket for long (aiohttp waits for headers without a deadline)."""
        server = self._runner.server
        assert server is not None  # set up in __aenter__
        loop = asyncio.get_running_loop()
        seen: dict[object, float] = {}
        while True:
            await asyncio.sleep(self.connection_timeout / 2)
            now = loop.time()
            seen = {handler: seen.get(handler, now) for handler in server.connections}
            for handler in server.connections:
                if now - seen[handler] >= self.connection_timeout:
                    handler.force_close()

    async def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async def run() -> list[tuple[Any, ...]]:
            async with self.jobs.pool.connection() as conn:
                cursor = await conn.execute(sql, params)
                return list(await cursor.fetchall())

        return await asyncio.wait_for(run(), self.query_timeout)

    async def _metrics(self, _request: web.Request) -> web.Response:
        try:
            queued = {str(s): int(n) for s, n in await self._query(SQL["queue_jobs"], (SYNC_TASK,))}
            ((overdue,),) = await self._query(SQL["overdue"], (_OVERDUE_MARGIN,))
        except Exception:  # the run metrics are still worth serving
            pass
        else:
            for status in ("todo", "doing"):
                self.metrics.queue.labels(status).set(queued.get(status, 0))
            self.metrics.overdue.set(int(overdue))
        body, content_type = self.metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _healthz(self, _request: web.Request) -> web.Response:
        error = None
        try:
            await self._query(SQL["ping"], ())
        except Exception as exc:
            error = " ".join(str(exc).split()) or type(exc).__name__
        age = self._clock() - self.jobs.heartbeat_at
        reason = health(age, self.jobs.stalled_after, error, self.jobs.job_worker_problem)
        if reason is None:
            return web.Response(text="ok\n")
        return web.Response(status=503, text=f"{reason}\n")
