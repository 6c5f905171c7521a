"""A worker that outlives its database (issue #35, point 3): PostgreSQL killed (SIGKILL)
and restarted under a running worker process. The worker must not stay up unable to run
jobs: it exits non-zero (its supervisor starts it again), `/healthz` says 503 until then,
and the run cut off by the outage is logged with the requests it spent."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator

import aiohttp
import pytest

from invoicing_async.testing import FakeInvoicingService
from tests.acceptance.jobs.postgres_process import RestartablePostgres
from tests.acceptance.jobs.test_jobs import ROOT, SECRET_ENV, acli, add, query, runs, stored
from tests.events import DB_LOOK, until
from tests.servers import ServerUnavailable, free_port, require_server

pytestmark = [pytest.mark.servers, pytest.mark.slow]

#: A worker process's start under load: a generous guard against a hang, not a speed claim.
STARTUP_GUARD = 120.0


@pytest.fixture
def postgres() -> Iterator[RestartablePostgres]:
    try:
        server = RestartablePostgres()
        server.start()
    except ServerUnavailable as exc:
        require_server(f"PostgreSQL could not start: {exc}")
    try:
        yield server
    finally:
        server.stop()


async def healthz(port: int) -> int | None:
    """/healthz's status, or None when nothing listens."""
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/healthz") as response,
        ):
            return response.status
    except aiohttp.ClientConnectionError:
        return None


def finished_runs(err: bytes) -> list[dict[str, object]]:
    lines = (json.loads(x) for x in err.decode().splitlines() if x.startswith("{"))
    return [x for x in lines if x.get("event") == "run_finished"]


async def test_a_worker_exits_non_zero_after_its_database_restarts_and_the_next_one_syncs(
    postgres: RestartablePostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = postgres.url()
    assert await acli("db", "migrate", url=url) == 0
    async with FakeInvoicingService(tls=False, invoices=300, seed=7) as service:
        monkeypatch.setenv(SECRET_ENV, service.password)
        # The run's fetches wait at this gate until the database is gone: it is cut off.
        gate = asyncio.Event()
        service.account.faults.gate = gate
        service.account.faults.only_paths = ("sync_fetch_ids",)
        await add(url, service)
        port = free_port()
        worker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "invoicing_async", "worker", "--database-url", url,
            "--concurrency", "1", "--heartbeat", "0.5", "--stalled-after", "2",
            "--metrics-port", str(port), "--log-format", "json",
            cwd=ROOT, env=dict(os.environ),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert worker.stderr is not None
        lines: list[bytes] = []
        stopping = asyncio.Event()

        async def read() -> None:
            assert worker.stderr is not None
            async for line in worker.stderr:
                lines.append(line)
                if b"stopping worker" in line:
                    stopping.set()

        reader = asyncio.create_task(read())
        try:
            await until(
                lambda: asyncio.to_thread(lambda: runs(url) == ["running"]),
                "the run started",
                guard=STARTUP_GUARD,
                look=DB_LOOK,
            )
            await until(lambda: service.account.counters["gated"] >= 1, "a fetch was sent")
            assert await healthz(port) == 200
            postgres.kill()
            gate.set()  # the answers arrive with the database gone: the run cannot write
            await until(stopping.is_set, "the worker lost its listener or heartbeat")
            # Started again only once the run failed: it cannot write on the new server.
            await until(lambda: finished_runs(b"".join(lines)), "the cut-off run ended")
            postgres.start()
            # Back to a database that answers, it must still say it cannot run jobs.
            statuses: list[int] = []

            async def stopped_serving() -> bool:
                status = await healthz(port)
                if status is not None:
                    statuses.append(status)
                return status is None

            await until(stopped_serving, "the worker stopped serving /healthz", look=DB_LOOK)
            assert set(statuses) <= {503}, statuses
            await worker.wait()
            await reader
        finally:
            if worker.returncode is None:
                worker.kill()
                await worker.wait()
            reader.cancel()
        err = b"".join(lines)
        assert worker.returncode == 1, err.decode()[-3000:]
        # Quiet (issue #42, point 9): JSON lines only, no traceback without -vv.
        assert all(line.startswith(b"{") for line in lines), err.decode()[-3000:]
        assert b"Traceback" not in err
        assert [line for line in lines if b"never retrieved" in line] == []
        assert b"the job worker stopped" in err
        [cut_off] = [x for x in finished_runs(err) if x["account"] == "acme"]
        assert cut_off["outcome"] == "error"
        assert isinstance(cut_off["requests"], int)
        assert cut_off["requests"] >= 2
        [(status, requests)] = query(url, "SELECT status, requests FROM invoicing_runs")
        assert (status, requests) == ("error", cut_off["requests"])

        # Its successor (what the supervisor starts) runs what is queued.
        assert await acli("enqueue", "acme", url=url) == 0
        # (Its row is gone if it unregistered; if not, it is stale.)
        query(
            url,
            "UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour'"
            " RETURNING id",
        )
        assert await acli("worker", "--until-idle", "--stalled-after", "2", url=url) == 0
        assert runs(url) == ["error", "complete"]
        assert await stored(url, "acme") == 300
