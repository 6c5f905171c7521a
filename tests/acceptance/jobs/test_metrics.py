"""`worker --metrics-port`: Prometheus metrics and /healthz, scraped over loopback from a
worker syncing against the fake service (issue #26, item 3)."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import aiohttp
import pytest
from procrastinate.exceptions import ConnectorException
from prometheus_client.parser import text_string_to_metric_families

from invoicing_async._jobs.metrics import MetricsServer, RunMetrics, health
from invoicing_async._jobs.tasks import Jobs
from invoicing_async.testing import FakeInvoicingService
from tests.acceptance.jobs.test_jobs import SECRET_ENV, acli, add, query
from tests.acceptance.jobs.test_jobs import service as service  # the fixture
from tests.events import DB_LOOK, until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics by (name, labels)."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = await response.text()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def get(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.text()


async def test_a_worker_serves_its_run_metrics_queue_and_health(
    migrated: str, service: FakeInvoicingService
) -> None:
    url = migrated
    await add(url, service, "acme")
    base = ("--username", "u", "--secret", f"env:{SECRET_ENV}")
    assert (
        await acli("accounts", "add", "down", "--base-url", "http://127.0.0.1:9", *base, url=url)
        == 0
    )
    port = free_port()
    worker = asyncio.create_task(
        acli("worker", "--metrics-port", str(port), "--metrics-per-host", url=url)
    )
    try:
        samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

        async def both_runs_shown() -> bool:
            nonlocal samples
            try:
                samples = await scrape(port)
            except aiohttp.ClientConnectionError:
                return False  # not listening yet
            return sum(v for (n, _), v in samples.items() if n == "invoicing_runs_total") >= 2

        await until(both_runs_shown, "the worker's two runs in its metrics", look=DB_LOOK)
        assert samples[("invoicing_runs_total", (("outcome", "complete"),))] == 1
        assert samples[("invoicing_runs_total", (("outcome", "error"),))] == 1
        assert samples[("invoicing_run_duration_seconds_count", (("outcome", "complete"),))] == 1
        (requests,) = query(url, "SELECT sum(requests) FROM invoicing_runs")[0]
        assert samples[("invoicing_requests_total", ())] == requests > 0
        assert samples[("invoicing_invoices_total", (("change", "created"),))] == 300
        assert samples[("invoicing_invoices_total", (("change", "deleted"),))] == 0
        host = service.base_url.split("//")[1].rstrip("/")
        assert 0 < samples[("invoicing_budget_remaining", (("host", host),))] < 350
        assert samples[("invoicing_run_budget_remaining_count", ())] == 2
        assert not [name for name, _ in samples if name.endswith("_created")]
        # Read from the database at the scrape: nothing waits, nothing is overdue.
        samples = await scrape(port)
        assert samples[("invoicing_queue_jobs", (("status", "todo"),))] == 0
        assert samples[("invoicing_accounts_overdue", ())] == 0
        assert await get(port, "/healthz") == (200, "ok\n")
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)


async def test_healthz_answers_503_with_the_reason(migrated: str) -> None:
    async with Jobs(migrated) as jobs:
        later = MetricsServer(jobs, RunMetrics(), port=0, clock=lambda: time.monotonic() + 100)
        async with later:
            status, text = await get(later.port, "/healthz")
            assert (status, text) == (503, "heartbeat stale: last 100s ago (limit 30s)\n")
        server = MetricsServer(jobs, RunMetrics(), port=0, query_timeout=0.5)
        async with server:
            assert (await get(server.port, "/healthz"))[0] == 200
            await jobs.pool.close()
            status, text = await get(server.port, "/healthz")
            assert status == 503
            assert text.startswith("database unreachable: ")
            # The run metrics are still served without the database.
            assert (await get(server.port, "/metrics"))[0] == 200


async def test_healthz_answers_503_once_the_job_worker_cannot_fetch_jobs(migrated: str) -> None:
    async with Jobs(migrated) as jobs:
        server = MetricsServer(jobs, RunMetrics(), port=0)
        async with server:
            assert (await get(server.port, "/healthz"))[0] == 200
            async with jobs.pool.connection() as conn:
                await conn.execute("ALTER TABLE procrastinate_jobs RENAME TO gone")
            with pytest.raises(ConnectorException):
                await jobs.manager.fetch_job(queues=None, worker_id=1)
            status, text = await get(server.port, "/healthz")
            assert status == 503
            assert text.startswith("the job worker stopped: fetching jobs failed: ")
            assert "procrastinate_jobs" in text  # psycopg's reason, not only "Database error"


def test_health_is_the_heartbeat_and_the_database() -> None:
    assert health(5.0, 30.0, None) is None
    assert health(31.0, 30.0, None) == "heartbeat stale: last 31s ago (limit 30s)"
    assert health(1.0, 30.0, "connection refused") == "database unreachable: connection refused"
    stopped = "the job worker stopped: the job listener failed: connection refused"
    assert health(1.0, 30.0, None, stopped) == stopped


def test_metrics_without_prometheus_client_name_the_extra(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from invoicing_async._jobs.metrics import RunMetrics\n"
        "try:\n    RunMetrics()\nexcept Exception as exc:\n    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout
    assert "[metrics] extra" in out


def series(metrics: RunMetrics) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    body, _ = metrics.exposition()
    return {
        (s.name, tuple(sorted(s.labels.items())))
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def observe_runs(metrics: RunMetrics, hosts: int) -> None:
    """600 runs of every outcome, spread over `hosts` customer hosts."""
    from invoicing_async import BasicAuth
    from invoicing_async._account_run import AccountRun, RunOutcome

    outcomes = ("complete", "incomplete", "budget", "locked", "error")
    for n in range(600):
        run = AccountRun(
            account=f"a{n}",
            base_url=f"https://h{n % hosts}.example:8443",
            auth=BasicAuth("u", "p"),
            open_store=lambda: None,  # type: ignore[arg-type,return-value]
        )
        outcome = RunOutcome(f"a{n}", outcomes[n % 5], seconds=n / 100, budget_left=n % 350)  # type: ignore[arg-type]
        metrics.finished(run, outcome)


def test_label_sets_are_bounded_whatever_the_number_of_hosts() -> None:
    few, many = RunMetrics(), RunMetrics()
    observe_runs(few, hosts=3)
    observe_runs(many, hosts=600)
    assert series(few) == series(many)  # the same series for 3 hosts as for 600
    labels = {key for _, pairs in series(many) for key, _ in pairs}
    assert labels == {"outcome", "change", "le"}
    assert ("invoicing_run_budget_remaining_count", ()) in series(many)
    assert not [name for name, _ in series(many) if name.endswith("_created")]


def test_the_per_host_gauge_is_opt_in() -> None:
    metrics = RunMetrics(per_host=True)
    observe_runs(metrics, hosts=40)
    hosts = {dict(pairs)["host"] for name, pairs in series(metrics) if "host" in dict(pairs)}
    assert hosts == {f"h{n}.example:8443" for n in range(40)}
    assert not [name for name, _ in series(metrics) if name.endswith("_created")]


def test_every_family_is_documented() -> None:
    metrics = RunMetrics(per_host=True)
    metrics.queue.labels("todo").set(0)
    body, _ = metrics.exposition()
    families = {f.name for f in text_string_to_metric_families(body.decode())}
    docs = (Path(__file__).parents[3] / "docs/operations/monitoring.md").read_text()
    exposed = {f"{name}_total" if f"`{name}_total`" in docs else name for name in families}
    assert len(families) == 8
    assert {name for name in exposed if f"| `{name}` |" not in docs} == set()
