"""Accounts, jobs and workers on a real PostgreSQL with procrastinate (issue #14, items 2-3)."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from invoicing_async._cli import _parser, main
from invoicing_async._cli.jobs import run_job_command
from invoicing_async._jobs.tasks import SYNC_TASK, Jobs
from invoicing_async._secrets import SecretError, SecretPolicy
from invoicing_async.sync import PostgresStore
from invoicing_async.testing import FakeInvoicingService
from tests.events import DB_LOOK, until

ROOT = Path(__file__).parents[3]
SECRET_ENV = "INVOICING_SECRET_TEST_JOBS"


def cli(*args: str, url: str) -> int:
    return main([*args, "--database-url", url])


async def acli(*args: str, url: str) -> int:
    """The command inside a running loop (`main` starts one of its own)."""
    return await run_job_command(_parser().parse_args([*args, "--database-url", url]))


def query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


@pytest.fixture
async def service(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeInvoicingService]:
    async with FakeInvoicingService(tls=False, invoices=300, seed=7) as svc:
        monkeypatch.setenv(SECRET_ENV, svc.password)
        yield svc


async def add(url: str, service: FakeInvoicingService, name: str = "acme", *extra: str) -> None:
    code = await acli(
        "accounts", "add", name, "--base-url", service.base_url, "--username",
        service.username, "--secret", f"env:{SECRET_ENV}", "--format", "json", *extra,
        url=url,
    )  # fmt: skip
    assert code == 0


async def work(
    url: str, *, concurrency: int = 2, stalled_after: float = 30.0, secrets_dir: Path | None = None
) -> None:
    """One in-process worker until no job is left."""
    policy = SecretPolicy(secrets_dir=secrets_dir)
    async with Jobs(url, stalled_after=stalled_after, secret_policy=policy) as jobs:
        await jobs.run_worker(concurrency=concurrency, wait=False, install_signal_handlers=False)


async def serve(url: str) -> None:
    """An in-process worker that waits for jobs until cancelled."""
    async with Jobs(url) as jobs:
        await jobs.run_worker(concurrency=2, install_signal_handlers=False)


async def stored(url: str, account: str) -> int:
    async with PostgresStore(url, account=account, migrate=False) as store:
        return len(await store.revisions())


def sync_jobs(url: str) -> list[str]:
    """The statuses of the sync jobs left in procrastinate's table."""
    rows = query(url, "SELECT status FROM procrastinate_jobs WHERE task_name = %s", (SYNC_TASK,))
    return [r[0] for r in rows]


def runs(url: str, account: str = "acme") -> list[str]:
    rows = query(
        url, "SELECT status FROM invoicing_runs WHERE account = %s ORDER BY id", (account,)
    )
    return [r[0] for r in rows]


# -- schema and accounts --------------------------------------------------------------------


def test_migrate_twice_is_idempotent(
    empty_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("db", "migrate", url=empty_postgres_url) == 0
    assert "migrated" in capsys.readouterr().out
    assert cli("db", "migrate", url=empty_postgres_url) == 0
    assert "up to date" in capsys.readouterr().out
    tables = {r[0] for r in query(empty_postgres_url, "SELECT tablename FROM pg_tables")}
    assert {"invoicing_accounts", "invoicing_runs", "procrastinate_jobs"} <= tables


def test_commands_need_a_database_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INVOICING_DATABASE_URL", raising=False)
    assert main(["status"]) == 2
    with pytest.raises(SystemExit) as info:
        main(["worker", "--concurrency", "0", "--database-url", "postgresql://x/y"])
    assert info.value.code == 2


def test_accounts_add_list_remove(migrated: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = migrated
    base = ("--base-url", "https://acme.example.com", "--username", "api-user")
    assert cli("accounts", "add", "acme", *base, "--secret", "env:ACME_PW", url=url) == 0
    assert cli("accounts", "add", "beta", *base, "--secret", "file:/run/secrets/b", url=url) == 0
    assert cli("accounts", "add", "acme", *base, "--secret", "env:X", url=url) == 1  # taken
    capsys.readouterr()
    # A secret given in place of a reference is refused, and not echoed.
    assert cli("accounts", "add", "gamma", *base, "--secret", "hunter2", url=url) == 2
    assert "hunter2" not in capsys.readouterr().err
    assert cli("accounts", "list", "--json", url=url) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(a["name"], a["secret_ref"], a["host"]) for a in listed] == [
        ("acme", "env:ACME_PW", "acme.example.com"),
        ("beta", "file:/run/secrets/b", "acme.example.com"),
    ]
    assert cli("accounts", "remove", "acme", url=url) == 0
    assert cli("accounts", "remove", "acme", url=url) == 1
    assert cli("accounts", "list", url=url) == 0
    out = capsys.readouterr().out
    assert "beta" in out
    assert "acme\t" not in out
    assert cli("enqueue", "nobody", url=url) == 2
    assert cli("enqueue", url=url) == 2


def test_enqueue_all_prints_one_line_and_status_sorts_names_naturally(
    migrated: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """500 accounts must not print 500 lines (each one under -v), and `account-2` comes
    before `account-10`."""
    url = migrated
    base = ("--base-url", "https://acme.example.com", "--username", "api-user")
    for name in ("account-10", "account-2", "account-1", "acme"):
        assert cli("accounts", "add", name, *base, "--secret", "env:PW", url=url) == 0
    capsys.readouterr()
    assert cli("enqueue", "account-2", url=url) == 0
    assert capsys.readouterr().out == "account-2: queued\n"
    assert cli("enqueue", "--all", url=url) == 0
    assert capsys.readouterr().out == "enqueued 4 accounts: 3 queued, 1 already waiting\n"
    assert cli("enqueue", "--all", "-v", url=url) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5
    assert lines[-1] == "enqueued 4 accounts: 0 queued, 4 already waiting"
    assert cli("status", url=url) == 0
    names = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()]
    assert names == ["account-1", "account-2", "account-10", "acme"]


async def test_a_secret_file_readable_by_others_is_refused(
    migrated: str, service: FakeInvoicingService, tmp_path: Path
) -> None:
    secret = tmp_path / "pw"
    secret.write_text(service.password)
    secret.chmod(0o644)
    code = await acli(
        "accounts", "add", "acme", "--base-url", service.base_url, "--username",
        service.username, "--secret", f"file:{secret}", url=migrated,
    )  # fmt: skip
    assert code == 0
    await work(migrated, secrets_dir=tmp_path)
    assert runs(migrated) == ["error"]
    [(error,)] = query(migrated, "SELECT error FROM invoicing_runs")
    assert "readable by others" in error
    secret.chmod(0o600)
    async with Jobs(migrated) as jobs:
        await jobs.enqueue(["acme"])
    await work(migrated, secrets_dir=tmp_path)
    assert runs(migrated) == ["error", "complete"]


# -- running --------------------------------------------------------------------------------


async def test_enqueue_and_work_syncs_and_records_the_run(
    migrated: str,
    service: FakeInvoicingService,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    await add(migrated, service)
    async with Jobs(migrated) as jobs:
        assert await jobs.enqueue(["acme"]) == {"acme": "queued"}
        assert await jobs.enqueue(["acme"]) == {"acme": "waiting"}  # the queueing lock
    # One job, before a worker takes it: the account's name, never a secret.
    args = [json.dumps(r[0]) for r in query(migrated, "SELECT args FROM procrastinate_jobs")]
    assert args == ['{"account": "acme"}']
    await work(migrated)
    assert await stored(migrated, "acme") == 300
    [(status, requests, created, due_in)] = query(
        migrated,
        "SELECT r.status, r.requests, r.created, extract(epoch FROM a.due_at - now())"
        " FROM invoicing_runs r JOIN invoicing_accounts a ON a.name = r.account",
    )
    assert (status, created) == ("complete", 300)
    assert requests > 0
    assert 86000 < due_in <= 86400  # due again in a day
    capsys.readouterr()
    assert await acli("status", "--json", url=migrated) == 0
    out = capsys.readouterr().out
    [line] = json.loads(out)
    assert (line["account"], line["run_status"], line["requests"]) == ("acme", "complete", requests)
    # The secret is nowhere: not in job rows, logs, tables or status output.
    # A succeeded job is deleted: `invoicing_runs` is the history.
    assert sync_jobs(migrated) == []
    dump = json.dumps(
        [query(migrated, f"SELECT * FROM {t}") for t in ("invoicing_accounts", "invoicing_runs")],
        default=str,
    )
    for text in (caplog.text, out, dump, *args):
        assert service.password not in text


async def test_remove_keeps_the_stored_invoices_unless_purged(
    migrated: str, service: FakeInvoicingService
) -> None:
    for name in ("acme", "beta"):
        await add(migrated, service, name)
    async with Jobs(migrated) as jobs:
        await jobs.enqueue(["acme", "beta"])
    await work(migrated)
    assert (await stored(migrated, "acme"), await stored(migrated, "beta")) == (300, 300)
    assert await acli("accounts", "remove", "acme", url=migrated) == 0
    assert await acli("accounts", "remove", "beta", "--purge", url=migrated) == 0
    assert await acli("accounts", "remove", "beta", "--purge", url=migrated) == 1
    assert (runs(migrated, "acme"), runs(migrated, "beta")) == ([], [])
    assert (await stored(migrated, "acme"), await stored(migrated, "beta")) == (300, 0)
    [(pending,)] = query(migrated, "SELECT count(*) FROM invoicing_pending WHERE account = 'beta'")
    assert pending == 0


async def our_connections(url: str) -> list[str]:
    """The application_name of every backend of ours on the test's database."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            "SELECT application_name FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name LIKE 'invoicing-async%%'"
        )
        return [str(r[0]) for r in await cursor.fetchall()]


async def test_a_worker_process_has_one_pool(
    migrated: str, service: FakeInvoicingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its runs' stores, its budget and procrastinate share one pool: there were three (the
    store's, the budget's and procrastinate's), up to 2 x pool_size + 4 connections."""
    from psycopg_pool import AsyncConnectionPool

    pools: list[object] = []
    made = AsyncConnectionPool.__init__

    def counted(self: AsyncConnectionPool, *args: Any, **kwargs: Any) -> None:
        pools.append(self)
        made(self, *args, **kwargs)

    names = [f"acct{i}" for i in range(5)]
    for name in names:
        await add(migrated, service, name)
    monkeypatch.setattr(AsyncConnectionPool, "__init__", counted)
    seen: list[list[str]] = []
    async with Jobs(migrated, pool_size=10) as jobs:
        assert jobs.app.connector.pool is jobs.pool  # type: ignore[attr-defined]
        await jobs.enqueue(names)
        worker = asyncio.ensure_future(
            jobs.run_worker(concurrency=5, wait=False, install_signal_handlers=False)
        )
        while not worker.done():
            seen.append(await our_connections(migrated))
            await asyncio.wait({worker}, timeout=0.05)
        await worker
        assert all(runs(migrated, name) == ["complete"] for name in names)
    assert pools == [jobs.pool]
    peak = max(map(len, seen))
    assert {name for names in seen for name in names} == {"invoicing-async"}
    assert 1 <= peak <= 10 + 1  # the pool, and procrastinate's LISTEN connection
    print(f"peak {peak} connections over {len(seen)} samples")
    # A backend leaves pg_stat_activity a moment after its client hangs up.

    async def all_gone() -> bool:
        return not await our_connections(migrated)

    await until(all_gone, "our backends left pg_stat_activity", look=DB_LOOK)
    assert await our_connections(migrated) == []


async def test_the_dispatcher_queues_due_accounts_only(
    migrated: str, service: FakeInvoicingService
) -> None:
    await add(migrated, service, "acme")
    await add(migrated, service, "later")
    query_ = "UPDATE invoicing_accounts SET due_at = now() + interval '1 hour' WHERE name = 'later'"
    with psycopg.connect(migrated) as conn:
        conn.execute(query_)
    async with Jobs(migrated) as jobs:
        assert await jobs.dispatch() == {"acme": "queued"}
        assert await jobs.dispatch() == {}  # acme is queued: not due until its run ends
    await work(migrated)
    assert runs(migrated, "acme") == ["complete"]
    assert runs(migrated, "later") == []
    # Queued (due_at NULL) with no job: a dispatcher died between its update and its defer.
    with psycopg.connect(migrated) as conn:
        conn.execute("UPDATE invoicing_accounts SET due_at = NULL WHERE name = 'later'")
    async with Jobs(migrated) as jobs:
        assert await jobs.dispatch() == {"later": "queued"}


async def test_two_dispatchers_at_once_queue_each_account_once_and_log_what_they_queued(
    migrated: str, caplog: pytest.LogCaptureFixture
) -> None:
    with psycopg.connect(migrated) as conn:
        conn.execute(
            "INSERT INTO invoicing_accounts (name, base_url, host, username, secret_ref)"
            " SELECT 'a' || n, 'https://h.example', 'h.example', 'u', 'env:INVOICING_SECRET_X'"
            " FROM generate_series(1, 300) n"
        )
    caplog.set_level(logging.INFO, "invoicing_async.jobs")
    async with Jobs(migrated) as one, Jobs(migrated) as two:
        results = await asyncio.gather(one.dispatch(), two.dispatch(), one.dispatch())
    states = [state for result in results for state in result.values()]
    assert states.count("queued") == 300
    logged = [r for r in caplog.records if getattr(r, "event", None) == "dispatched"]
    assert sum(r.__dict__["queued"] for r in logged) == 300
    assert sum(r.__dict__["waiting"] for r in logged) == states.count("waiting")
    assert sync_jobs(migrated) == ["todo"] * 300


async def test_two_workers_never_sync_one_account_at_once(
    migrated: str, service: FakeInvoicingService
) -> None:
    service.account.faults.latency = 0.2
    await add(migrated, service)
    async with Jobs(migrated) as jobs:
        await jobs.enqueue(["acme"])
        workers = [asyncio.create_task(serve(migrated)) for _ in range(2)]
        try:
            await until(lambda: runs(migrated) == ["running"], "the run started", look=DB_LOOK)
            # One running, so one more may wait; a third finds it waiting.
            assert await jobs.enqueue(["acme"]) == {"acme": "queued"}
            assert await jobs.enqueue(["acme"]) == {"acme": "waiting"}
            await until(
                lambda: runs(migrated) == ["complete", "complete"], "both runs", look=DB_LOOK
            )
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
    rows = query(
        migrated,
        "SELECT status, started_at, finished_at FROM invoicing_runs ORDER BY started_at",
    )
    assert [r[0] for r in rows] == ["complete", "complete"]
    assert rows[0][2] <= rows[1][1]  # the second started after the first finished
    assert await stored(migrated, "acme") == 300


async def test_a_budget_stop_makes_the_account_due_when_the_budget_allows(
    migrated: str, service: FakeInvoicingService
) -> None:
    await add(migrated, service, "acme", "--limit", "3")
    async with Jobs(migrated) as jobs:
        await jobs.enqueue(["acme"])
    await work(migrated)
    [(status, eta, due_in)] = query(
        migrated,
        "SELECT r.status, r.eta_seconds, extract(epoch FROM a.due_at - now())"
        " FROM invoicing_runs r JOIN invoicing_accounts a ON a.name = r.account",
    )
    assert status == "budget"
    assert eta is not None
    assert 60 < float(due_in) <= 3600
    assert sync_jobs(migrated) == []  # the job succeeded (the run is "budget"): deleted


async def worker_process(url: str, *extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "invoicing_async", "worker", "--database-url", url,
        "--concurrency", "1", "--heartbeat", "0.5", "--stalled-after", "2", *extra,
        cwd=ROOT, env=dict(os.environ),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def killed_mid_run(url: str, service: FakeInvoicingService) -> None:
    """A worker process killed (SIGKILL) while it syncs the account `acme`."""
    service.account.faults.latency = 1.0
    await add(url, service)
    first = await worker_process(url)
    try:
        await until(lambda: runs(url) == ["running"], "the run started", look=DB_LOOK)
    finally:
        first.send_signal(signal.SIGKILL)
        await first.wait()


@pytest.mark.slow
async def test_a_killed_workers_account_is_synced_after_restart(
    migrated: str, service: FakeInvoicingService
) -> None:
    await killed_mid_run(migrated, service)
    assert query(
        migrated, "SELECT status FROM procrastinate_jobs WHERE task_name = %s", (SYNC_TASK,)
    ) == [("doing",)]
    service.account.faults.latency = 0.0
    # The killed worker's heartbeat grows stale: an hour passes, for its row.
    aged = query(
        migrated,
        "UPDATE procrastinate_workers SET last_heartbeat = last_heartbeat - interval '1 hour'"
        " RETURNING id",
    )
    assert len(aged) == 1
    second = await worker_process(migrated, "--until-idle")
    out, err = await asyncio.wait_for(second.communicate(), 60)
    assert second.returncode == 0, err.decode()
    assert runs(migrated) == ["lost", "complete"], err.decode()
    assert await stored(migrated, "acme") == 300
    assert service.password not in out.decode() + err.decode()


async def test_a_workers_runs_share_one_http_session_that_keeps_no_cookies(
    migrated: str, service: FakeInvoicingService
) -> None:
    import aiohttp

    from invoicing_async._jobs.accounts import list_accounts

    await add(migrated, service, "acme")
    await add(migrated, service, "beta")
    async with Jobs(migrated) as jobs:
        async with jobs.pool.connection() as conn:
            acme, beta = await list_accounts(conn)
        assert (acme.name, beta.name) == ("acme", "beta")
        assert await jobs.sync("acme") == "complete"
        assert await jobs.sync("beta") == "complete"
        session = jobs.account_run(acme).session
        assert session is not None
        assert jobs.account_run(beta).session is session
        # Accounts of one host share it: a cookie one account's server sets must never
        # reach another account's requests.
        assert isinstance(session.cookie_jar, aiohttp.DummyCookieJar)
    assert session.closed


async def test_a_failed_run_is_recorded_without_its_secret(
    migrated: str, service: FakeInvoicingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add(migrated, service)
    monkeypatch.setenv(SECRET_ENV, "wrong-hunter2-secret")
    async with Jobs(migrated) as jobs:
        assert await jobs.sync("acme") == "error"
    [(error, due_in)] = query(
        migrated,
        "SELECT r.error, extract(epoch FROM a.due_at - now())"
        " FROM invoicing_runs r JOIN invoicing_accounts a ON a.name = r.account",
    )
    assert error
    assert "wrong-hunter2-secret" not in error
    assert 800 < float(due_in) <= 900  # retried in 15 minutes (the first failure)


async def test_a_run_finding_its_account_locked_leaves_it_alone(
    migrated: str, service: FakeInvoicingService
) -> None:
    await add(migrated, service)
    with psycopg.connect(migrated, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_advisory_lock(hashtextextended(%s, 0))", ("invoicing-account:acme",)
        )
        async with Jobs(migrated) as jobs:
            assert await jobs.sync("acme") == "locked"
    assert runs(migrated) == ["locked"]
    assert await stored(migrated, "acme") == 0


async def test_secret_references_and_oauth1(monkeypatch: pytest.MonkeyPatch) -> None:
    from invoicing_async import OAuth1Auth
    from invoicing_async._account_run import Credentials
    from invoicing_async._jobs.accounts import AccountError, new_account

    for bad in ("hunter2", "env:1X", "file:relative/path", "vault:x"):
        with pytest.raises(AccountError) as info:
            new_account("a", base_url="https://h.example", credentials=Credentials("u", bad))
        assert bad not in str(info.value)
    with pytest.raises(AccountError, match="not in the base URL"):
        new_account("a", base_url="https://u:pw@h.example", credentials=Credentials("u", "env:X"))
    with pytest.raises(AccountError, match="OAuth 1 needs"):
        new_account("a", base_url="https://h", credentials=Credentials("ck", "env:CS", oauth1=True))
    account = new_account(
        "a",
        base_url="https://h.example:8443/x",
        credentials=Credentials(
            "ck",
            "env:INVOICING_SECRET_CS",
            oauth1=True,
            token="tk",
            token_secret="env:INVOICING_SECRET_TS",
        ),
    )
    assert account.host == "h.example:8443"
    monkeypatch.setenv("INVOICING_SECRET_CS", "consumer-secret")
    monkeypatch.setenv("INVOICING_SECRET_TS", "token-secret")
    policy = SecretPolicy()
    assert isinstance(await account.credentials().resolve(policy), OAuth1Auth)
    assert "consumer-secret" not in repr(account)
    monkeypatch.delenv("INVOICING_SECRET_TS")
    with pytest.raises(SecretError, match=r"\$INVOICING_SECRET_TS \(token secret\) is not set"):
        await account.credentials().resolve(policy)


@pytest.mark.slow
async def test_the_worker_command_syncs_and_stops_on_sigterm(
    migrated: str, service: FakeInvoicingService
) -> None:
    await add(migrated, service)
    worker = await worker_process(migrated)
    try:
        await until(lambda: runs(migrated) == ["complete"], "the run completed", look=DB_LOOK)
    finally:
        worker.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(worker.communicate(), 30)
    assert worker.returncode == 0, err.decode()
    assert service.password not in out.decode() + err.decode()
    assert await stored(migrated, "acme") == 300


NO_PROCRASTINATE = (
    "import sys; sys.modules['procrastinate'] = None\n"
    "from invoicing_async._cli import main\n"
    "raise SystemExit(main(['status', '--database-url', sys.argv[1]]))\n"
)


async def test_without_procrastinate_the_commands_name_the_extra(migrated: str) -> None:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", NO_PROCRASTINATE, migrated, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode == 1
    assert "pip install -e '.[postgres]'" in err.decode()


# -- secrets confined to the worker's policy ------------------------------------------------


async def test_the_worker_reads_only_the_secrets_its_policy_allows(
    migrated: str, service: FakeInvoicingService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An account row naming the worker's own secrets gets an error run, and the capture
    server (the URL the row names) never sees a request."""
    from tests.integration.test_account_run import capture_server

    monkeypatch.setenv("INVOICING_DATABASE_URL", migrated)
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    other = tmp_path / "other-secret"
    other.write_text("not-yours")
    other.chmod(0o600)
    os.mkfifo(secrets / "fifo", 0o600)
    async with capture_server() as (url, seen):
        for name, ref in [
            ("env-outside", "env:INVOICING_DATABASE_URL"),
            ("file-outside", f"file:{other}"),
            ("link-outside", f"file:{secrets / 'link'}"),
            ("fifo", f"file:{secrets / 'fifo'}"),
        ]:
            code = await acli(
                "accounts", "add", name, "--base-url", url, "--username", "u",
                "--secret", ref, url=migrated,
            )  # fmt: skip
            assert code == 0
        (secrets / "link").symlink_to(other)
        await add(migrated, service, "good")
        await work(migrated, concurrency=1, secrets_dir=secrets)
    assert seen == []
    errors = dict(
        query(migrated, "SELECT account, error FROM invoicing_runs WHERE status = 'error'")
    )
    assert "reads only variables named INVOICING_SECRET_*" in errors["env-outside"]
    assert "not under the secrets directory" in errors["file-outside"]
    assert "not under the secrets directory" in errors["link-outside"]
    assert "not a regular file" in errors["fifo"]
    assert runs(migrated, "good") == ["complete"]  # the FIFO froze nothing


# -- failures: backoff, streaks, exit codes -------------------------------------------------


def test_next_due_backs_off_failures_up_to_the_cap() -> None:
    from invoicing_async._account_run import RunOutcome
    from invoicing_async._jobs.status import next_due

    def due(status: str, failures_before: int = 0, eta: float | None = None) -> float:
        outcome = RunOutcome("a", status, eta=eta)  # type: ignore[arg-type]
        return next_due(
            outcome,
            every=86400,
            retry_after=900,
            retry_cap=6 * 3600,
            failures_before=failures_before,
        )

    assert [due("error", n) for n in range(7)] == [900, 1800, 3600, 7200, 14400, 21600, 21600]
    assert due("error", 10_000) == 21600
    assert due("complete", 5) == 86400
    assert due("incomplete") == 900
    assert due("budget", eta=120) == 120
    assert due("locked") == 300


def test_status_check_finds_failed_and_overdue_accounts() -> None:
    import datetime as dt

    from invoicing_async._jobs.status import AccountStatus, problems

    now = dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc)

    def row(
        account: str, status: str | None, due_ago: float | None, failures: int = 0
    ) -> AccountStatus:
        due = None if due_ago is None else now - dt.timedelta(seconds=due_ago)
        return AccountStatus(
            account, "h", due, status, None, None, 0, 0, 0, 0, 0, 0, None,
            "401 wrong password" if status == "error" else None, None, failures,
        )  # fmt: skip

    rows = [
        row("fine", "complete", -3600),
        row("late", "complete", 7200),
        row("a-bit-late", "complete", 60),
        row("failing", "error", -900, failures=3),
        row("queued", None, None),
    ]
    assert problems(rows, overdue_margin=3600, now=now) == [
        "late: overdue by 7200s",
        "failing: last run error (3 in a row): 401 wrong password",
    ]
    assert problems(rows[:1], overdue_margin=3600, now=now) == []


async def test_a_failing_account_backs_off_and_status_shows_its_streak(
    migrated: str,
    service: FakeInvoicingService,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await add(migrated, service)
    monkeypatch.setenv(SECRET_ENV, "wrong-password")
    due = "SELECT extract(epoch FROM due_at - now()) FROM invoicing_accounts"
    seen = []
    async with Jobs(migrated) as jobs:
        for _ in range(3):
            assert await jobs.sync("acme") == "error"
            seen.append(float(query(migrated, due)[0][0]))
    assert [round(s / 100) * 100 for s in seen] == [900, 1800, 3600]
    capsys.readouterr()
    assert await acli("status", url=migrated) == 0
    assert "3 failures in a row" in capsys.readouterr().out
    assert await acli("status", "--check", url=migrated) == 1
    assert "acme: last run error (3 in a row)" in capsys.readouterr().err
    monkeypatch.setenv(SECRET_ENV, service.password)
    async with Jobs(migrated) as jobs:
        assert await jobs.sync("acme") == "complete"
    assert await acli("status", "--check", "--json", url=migrated) == 0
    [line] = json.loads(capsys.readouterr().out)
    assert line["failures"] == 0


async def test_status_check_prints_the_problems_or_one_line_and_status_account_one_account(
    migrated: str,
    service: FakeInvoicingService,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("acme", "beta", "gamma"):
        await add(migrated, service, name)
    async with Jobs(migrated) as jobs:
        for name in ("acme", "beta"):
            assert await jobs.sync(name) == "complete"
    capsys.readouterr()
    assert await acli("status", "--check", url=migrated) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("ok: 3 accounts, none failing or overdue (2 complete, 1 never run)\n", "")
    assert await acli("status", "beta", url=migrated) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("beta: complete, ")
    assert "acme" not in out
    assert "  invoices: 300 created, 0 updated, 0 deleted; 300/300 done" in out
    assert await acli("status", "nobody", url=migrated) == 2
    assert "no account 'nobody'" in capsys.readouterr().err
    monkeypatch.setenv(SECRET_ENV, "wrong-password")
    async with Jobs(migrated) as jobs:
        assert await jobs.sync("gamma") == "error"
    capsys.readouterr()
    assert await acli("status", "--check", url=migrated) == 1
    out, err = capsys.readouterr()
    assert out == ""
    [problem, total] = err.splitlines()
    assert problem.startswith("check: gamma: last run error: ")
    assert total == "check: 1 of 3 accounts need attention"
    assert await acli("status", "--check", "acme", url=migrated) == 0
    assert capsys.readouterr().out.startswith("ok: 1 account, ")


def test_worker_until_idle_exits_1_when_a_run_failed_and_logs_each_run(
    migrated: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ("--username", "u", "--secret", "env:INVOICING_SECRET_UNSET_FOR_TEST")
    assert (
        cli("accounts", "add", "down", "--base-url", "http://127.0.0.1:9", *base, url=migrated) == 0
    )
    capsys.readouterr()
    assert cli("worker", "--until-idle", "--log-format", "json", url=migrated) == 1
    assert runs(migrated, "down") == ["error"]
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    started, finished = (x for x in lines if x.get("account") == "down")
    assert (started["event"], started["level"]) == ("run_started", "info")
    assert (finished["event"], finished["level"], finished["outcome"]) == (
        "run_finished",
        "error",
        "error",
    )
    assert "INVOICING_SECRET_UNSET_FOR_TEST" in finished["error"]
    assert finished["next_due_in"] == 900
    assert {"requests", "invoices_created", "duration", "budget_left"} <= finished.keys()
    assert cli("worker", "--until-idle", url=migrated) == 0  # nothing ran: nothing failed


async def test_status_into_a_closed_pipe_is_quiet(migrated: str) -> None:
    for n in range(30):
        assert await acli("accounts", "add", f"a{n}", "--base-url", "https://h.example", "--username",
                   "u", "--secret", "env:INVOICING_SECRET_X", url=migrated) == 0  # fmt: skip
    read, write = os.pipe()
    os.close(read)
    try:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "invoicing_async", "status", "--database-url", migrated,
            stdout=write, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        )  # fmt: skip
    finally:
        os.close(write)
    _, err = await asyncio.wait_for(child.communicate(), 60)
    assert (child.returncode, err) == (141, b"")


async def test_the_watchdog_recovers_stalled_jobs_every_interval(
    migrated: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Virtual time: the watchdog's sleeps are recorded, not slept."""
    slept: list[float] = []
    recovered = 0

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) > 3:
            raise asyncio.CancelledError

    async with Jobs(migrated, stalled_after=2) as jobs:

        async def recover() -> list[str]:
            nonlocal recovered
            recovered += 1
            if recovered == 2:
                raise OSError("database gone for a moment")  # the next tick tries again
            return []

        monkeypatch.setattr(jobs, "recover_stalled", recover)
        with pytest.raises(asyncio.CancelledError):
            await jobs.watch_stalled(1.0, sleep=sleep)
    assert slept == [1.0, 1.0, 1.0, 1.0]
    assert recovered == 3


@pytest.mark.slow
async def test_a_running_worker_recovers_a_killed_workers_job_promptly(
    migrated: str, service: FakeInvoicingService
) -> None:
    """Not at the dispatcher's next minute: by the worker's watchdog (within `stalled_after`
    and a tick), seen as the watchdog's own recovery, not as a time bound."""
    await killed_mid_run(migrated, service)
    service.account.faults.latency = 0.0
    recoveries: list[tuple[str, list[str]]] = []
    async with Jobs(migrated, stalled_after=2) as jobs:
        recover = jobs.recover_stalled

        async def recording() -> list[str]:
            frame = inspect.currentframe()
            caller = frame.f_back.f_code.co_name if frame and frame.f_back else "?"
            found = await recover()
            recoveries.append((caller, found))
            return found

        jobs.recover_stalled = recording  # type: ignore[method-assign]
        task = asyncio.create_task(
            jobs.run_worker(concurrency=1, heartbeat=0.5, install_signal_handlers=False)
        )
        try:
            await until(lambda: runs(migrated) == ["lost", "complete"], "recovered", look=DB_LOOK)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert ("watch_stalled", ["acme"]) in recoveries, recoveries


async def test_a_run_whose_worker_is_gone_is_closed_and_a_live_one_is_not(
    migrated: str, service: FakeInvoicingService
) -> None:
    """Issue #42, point 9: a run left `running` (its worker killed, or the database
    restarted under it) is closed by the next worker; one whose account's lock is held
    (its worker alive) stays running, whatever the sign of the lock's key."""
    names = [f"acct-{i}" for i in range(40)]
    keys = {
        x: query(migrated, "SELECT hashtextextended(%s, 0)", (f"invoicing-account:{x}",))[0][0]
        for x in names
    }
    live = [min(names, key=keys.__getitem__), max(names, key=keys.__getitem__)]
    assert keys[live[0]] < 0 < keys[live[1]]
    gone = "acct-gone"
    for name in [*live, gone]:
        await add(migrated, service, name)
        query(
            migrated,
            "INSERT INTO invoicing_runs (account, job_id, worker) VALUES (%s, NULL, 'w:1')"
            " RETURNING id",
            (name,),
        )
    query(migrated, "UPDATE invoicing_accounts SET due_at = NULL RETURNING name")
    with psycopg.connect(migrated, autocommit=True) as holder:
        for name in live:
            holder.execute("SELECT pg_advisory_lock(%s)", (keys[name],))
        async with Jobs(migrated) as jobs:
            assert await jobs.recover_stalled() == []
        statuses = dict(query(migrated, "SELECT account, status FROM invoicing_runs"))
    assert statuses == {live[0]: "running", live[1]: "running", gone: "lost"}
    due = query(migrated, "SELECT name FROM invoicing_accounts WHERE due_at IS NOT NULL")
    assert due == [(gone,)]
