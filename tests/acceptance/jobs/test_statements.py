"""Statements per account run, counted by PostgreSQL itself (issue #35, point 1).

A server of the test's own loads `pg_stat_statements` (top-level statements only, BEGIN
and COMMIT included); a worker runs queued accounts until idle, and the statements of
its database are summed and divided by the runs. Queueing the jobs and the worker's start
(dispatch, registering) are counted too, spread over the runs. The limits are the issue's targets: a run that finds
nothing changed takes at most 10 statements, a first sync of 100 invoices at most 14.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from invoicing_async._jobs.tasks import Jobs
from invoicing_async.testing import FakeInvoicingService
from tests.acceptance.jobs.postgres_process import RestartablePostgres
from tests.acceptance.jobs.test_jobs import SECRET_ENV, acli, add, query, runs
from tests.servers import ServerUnavailable, require_server

pytestmark = [pytest.mark.servers, pytest.mark.slow]

ACCOUNTS = 30


@pytest.fixture(scope="module")
def counting_server() -> Iterator[RestartablePostgres]:
    try:
        server = RestartablePostgres(
            "shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=top"
        )
        server.start()
    except ServerUnavailable as exc:
        require_server(f"PostgreSQL with pg_stat_statements could not start: {exc}")
    try:
        yield server
    finally:
        server.stop()


def statements(url: str) -> dict[str, int]:
    """Calls of each statement of this database since the last reset."""
    rows = query(
        url,
        "SELECT query, calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
        " WHERE d.datname = current_database() AND query NOT LIKE %s",
        ("%pg_stat_statements%",),
    )
    return {str(q): int(c) for q, c in rows}


async def worker_pass(url: str) -> dict[str, int]:
    """Count the statements of queueing every account and of one worker running them all."""
    query(url, "SELECT count(*) FROM (SELECT pg_stat_statements_reset()) r")
    async with Jobs(url) as jobs:
        await jobs.enqueue([f"a{n}" for n in range(ACCOUNTS)])
    async with Jobs(url) as jobs:
        await jobs.run_worker(concurrency=4, wait=False, install_signal_handlers=False)
    return statements(url)


def report(counted: dict[str, int]) -> str:
    top = sorted(counted.items(), key=lambda x: -x[1])
    return "\n".join(f"{calls / ACCOUNTS:6.2f}  {' '.join(q.split())[:140]}" for q, calls in top)


async def test_statements_per_account_run(
    counting_server: RestartablePostgres,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with psycopg.connect(counting_server.url(), autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS counted WITH (FORCE)")
        conn.execute("CREATE DATABASE counted")
    url = counting_server.url("counted")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
    assert await acli("db", "migrate", url=url) == 0
    async with FakeInvoicingService(tls=False, invoices=100, seed=3) as service:
        monkeypatch.setenv(SECRET_ENV, service.password)
        for n in range(ACCOUNTS):
            await add(url, service, f"a{n}", "--limit", "100000")
        first = await worker_pass(url)
        again = await worker_pass(url)
    assert [set(runs(url, f"a{n}")) for n in range(ACCOUNTS)] == [{"complete"}] * ACCOUNTS
    first_sync = sum(first.values()) / ACCOUNTS
    no_change = sum(again.values()) / ACCOUNTS
    with capsys.disabled():
        print(
            f"\nstatements per account run: first sync of 100 invoices {first_sync:.2f},"
            f" no change {no_change:.2f}"
        )
    assert no_change <= 10, report(again)
    assert first_sync <= 14, report(first)
