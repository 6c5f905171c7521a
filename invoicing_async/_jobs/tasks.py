"""The procrastinate app: a task that syncs one account, and a periodic dispatcher that
queues the accounts whose `due_at` has passed (never a job deferred into the future,
procrastinate #1599). Jobs carry the account's name only and are locked on it."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
import attrs
import procrastinate
from procrastinate import JobContext
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.jobs import Status
from procrastinate.manager import JobManager
from procrastinate.schema import SchemaManager

import invoicing_async as ia
from invoicing_async._account_run import AccountRun, RunObserver, RunOutcome
from invoicing_async._budget import postgres as budget_postgres
from invoicing_async._budget.postgres import PostgresBudgetStore
from invoicing_async._jobs import SQL
from invoicing_async._jobs.accounts import Account
from invoicing_async._jobs.status import (
    StartedRun,
    close_orphan_runs,
    finish_run,
    mark_lost,
    next_due,
    record_progress,
    start_run,
)
from invoicing_async._postgres import locks, migrations
from invoicing_async._postgres.connect import connection_pool
from invoicing_async._postgres.reasons import describe, where_of
from invoicing_async._secrets import SecretPolicy
from invoicing_async._sync import postgres as store_postgres
from invoicing_async._sync.postgres import PostgresStore
from invoicing_async._sync.report import SyncProgress
from invoicing_async._text import package_logger
from invoicing_async.errors import StoreError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow
    from psycopg_pool import AsyncConnectionPool

    Pool = AsyncConnectionPool[AsyncConnection[TupleRow]]
    Conn = AsyncConnection[TupleRow]

__all__ = ["COMPONENTS", "DISPATCH_TASK", "SYNC_TASK", "Jobs", "WatchedJobManager"]

logger = package_logger("invoicing_async.jobs")

SYNC_TASK = "invoicing.sync_account"
DISPATCH_TASK = "invoicing.dispatch"
#: Every schema a jobs database holds; the jobs layer's own (accounts, runs) in ``_jobs/sql/``.
COMPONENTS = (
    store_postgres.SCHEMA,
    budget_postgres.SCHEMA,
    migrations.Component("jobs", "invoicing_async._jobs"),
)
#: Jobs deferred in one statement.
_DEFER_BATCH = 500
#: Seconds between the tries to record a run's outcome while the database is away.
_FINISH_RETRIES = (0.5, 1.0, 2.0, 4.0, 8.0)
#: Seconds between writes of a run's progress.
_PROGRESS_EVERY = 2.0
#: Seconds before a failed account is due again (doubled per failure in a row).
_RETRY_AFTER = 900.0
#: Fetch requests in flight at once in each account's run.
_ENGINE_CONCURRENCY = 4

T = TypeVar("T")


class WatchedJobManager(JobManager):
    """procrastinate's `JobManager`, whose `failure` names at once the first failure of the
    worker's side loops, which stops the worker (for `/healthz` and the worker's exit)."""

    failure: str | None = None

    async def _watched(self, what: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except AlreadyEnqueued:  # the dispatcher's job already waits: not a failure
            raise
        except Exception as exc:
            if self.failure is None:  # procrastinate's "Database error." wraps psycopg's
                self.failure = f"{what}: {describe(exc.__cause__ or exc)}"
            raise

    async def fetch_job(self, *args: Any, **kwargs: Any) -> Any:
        return await self._watched("fetching jobs failed", super().fetch_job(*args, **kwargs))

    async def listen_for_jobs(self, *args: Any, **kwargs: Any) -> None:
        call = super().listen_for_jobs(*args, **kwargs)
        await self._watched("the job listener failed", call)

    async def defer_periodic_job(self, *args: Any, **kwargs: Any) -> Any:
        call = super().defer_periodic_job(*args, **kwargs)
        return await self._watched("deferring the dispatcher failed", call)

    async def update_heartbeat(self, *args: Any, **kwargs: Any) -> None:
        call = super().update_heartbeat(*args, **kwargs)
        await self._watched("the worker heartbeat failed", call)

    async def finish_job(self, *args: Any, **kwargs: Any) -> None:
        await self._watched("recording a job's end failed", super().finish_job(*args, **kwargs))

    async def retry_job(self, *args: Any, **kwargs: Any) -> None:
        await self._watched("recording a job's retry failed", super().retry_job(*args, **kwargs))


def _retrieve_exception(task: asyncio.Task[Any]) -> None:
    """A job's task ended: its exception retrieved (procrastinate does not retrieve it when
    recording the job's end failed, and asyncio would log it as never retrieved; the
    failure is the manager's, and the worker exits on it)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        logger.debug("a job's task ended in error: %s", describe(exc))


class Jobs:
    """Our tables and procrastinate's app on one database (one pool); open with ``async with``.

    `stalled_after`: seconds without a heartbeat before a worker's jobs are declared lost.
    A failed account is due again after `_RETRY_AFTER` seconds, doubled per failure up to
    `retry_cap`. `secret_policy`: which secret references this worker may read."""

    def __init__(
        self,
        database_url: str,
        *,
        stalled_after: float = 30.0,
        retry_cap: float = 6 * 3600.0,
        pool_size: int = 10,
        secret_policy: SecretPolicy | None = None,
        observers: Sequence[RunObserver] = (),
    ) -> None:
        self.database_url = database_url
        self.stalled_after = stalled_after
        self.retry_cap = retry_cap
        self.secret_policy = secret_policy if secret_policy is not None else SecretPolicy()
        self.observers = tuple(observers)
        #: Runs of this process that ended in error (`worker --until-idle` exits 1 if any).
        self.failed_runs = 0
        #: `time.monotonic()` of the watchdog's last round trip to the database (`/healthz`).
        self.heartbeat_at = time.monotonic()
        self.pool: Pool = connection_pool(database_url, max_size=pool_size, statement_timeout=60)
        self.budget_store = PostgresBudgetStore(database_url, timeout=5.0, pool=self.pool)
        connector = procrastinate.PsycopgConnector(conninfo=database_url)
        self.app = procrastinate.App(connector=connector)
        self.manager = WatchedJobManager(connector)
        self.app.job_manager = self.manager

        @self.app.task(name=SYNC_TASK, retry=False, pass_context=True)
        async def sync_account(context: JobContext, account: str) -> str:
            job_task = asyncio.current_task()  # procrastinate's task of this job
            if job_task is not None:
                job_task.add_done_callback(_retrieve_exception)
            return await self.sync(account, job_id=context.job.id, worker=context.worker_name)

        @self.app.periodic(cron="* * * * *", periodic_id="dispatch")
        @self.app.task(name=DISPATCH_TASK, retry=False, queueing_lock=DISPATCH_TASK)
        async def dispatch(timestamp: int) -> int:
            logger.debug("dispatching for the minute of %d", timestamp)
            return len(await self.dispatch())

        self.sync_task = sync_account
        # The HTTP session of this worker's runs (made on first use, in the loop).
        self._http: aiohttp.ClientSession | None = None
        # Why the job worker cannot run jobs (see `job_worker_problem`).
        self.worker_problem: str | None = None
        self._stop_requested = False
        # The jobs this process is running: never recovered as stalled by its own watchdog
        # (its heartbeat stops with its job worker, while those jobs still end here).
        self._running_jobs: set[int] = set()

    async def __aenter__(self) -> Jobs:
        await self.pool.open()  # a wrong URL fails here, at once, with the server's reason
        try:
            await self.app.open_async(pool=self.pool)
        except BaseException:
            await self.pool.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.close()
        await self.app.close_async()
        await self.budget_store.close()
        await self.pool.close()

    async def migrate(self) -> list[str]:
        """Apply all migrations, procrastinate's schema last (idempotent); the names applied."""
        async with self.pool.connection() as conn:
            applied = await migrations.apply(conn, COMPONENTS, where_of(self.database_url))
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (locks.MIGRATIONS,))
                cursor = await conn.execute(SQL["has_procrastinate"])
                row = await cursor.fetchone()
                if row is not None and not row[0]:
                    await conn.execute(SchemaManager.get_schema())
                await conn.execute(SQL["tune_procrastinate"])
        return [f"{m.component}/{m.name}" for m in applied]

    async def enqueue(self, names: list[str]) -> dict[str, str]:
        """Queue a job per account now: "queued", or "waiting" when one already waits."""
        async with self.pool.connection() as conn:
            await conn.execute(SQL["queue_accounts"], (names,))
        return await self._defer(names)

    async def _defer(self, names: list[str]) -> dict[str, str]:
        """A job per account, in batches; a batch where one already waits goes one by one."""
        result: dict[str, str] = {}
        for start in range(0, len(names), _DEFER_BATCH):
            batch = names[start : start + _DEFER_BATCH]
            tasks = {
                name: self.sync_task.configure(lock=name, queueing_lock=name) for name in batch
            }
            try:
                await self.manager.batch_defer_jobs_async(
                    [task.make_new_job(account=name) for name, task in tasks.items()]
                )
            except AlreadyEnqueued:
                for name, task in tasks.items():
                    try:
                        await task.defer_async(account=name)
                        result[name] = "queued"
                    except AlreadyEnqueued:
                        result[name] = "waiting"
                    except BaseException:
                        await self._due_now([name])
                        raise
            except BaseException:
                await self._due_now(batch)
                raise
            else:
                result.update(dict.fromkeys(batch, "queued"))
        return result

    async def _due_now(self, names: list[str]) -> None:
        """Accounts whose job could not be deferred are due again: never forgotten."""
        async with self.pool.connection() as conn:
            await conn.execute(SQL["due_now"], (names,))

    async def dispatch(self) -> dict[str, str]:
        """Recover lost jobs, then queue every due account; {} when another dispatcher is at it."""
        await self.recover_stalled()
        async with self.pool.connection() as conn:
            cursor = await conn.execute("SELECT pg_try_advisory_lock(%s)", (locks.DISPATCH,))
            row = await cursor.fetchone()
            if row is None or not row[0]:
                return {}
            try:
                await conn.execute(SQL["orphans_due"], (SYNC_TASK,))
                cursor = await conn.execute(SQL["queue_due"])
                names = sorted(str(row[0]) for row in await cursor.fetchall())
                queued = await self._defer(names)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (locks.DISPATCH,))
        fresh = sum(1 for state in queued.values() if state == "queued")
        if queued:
            logger.info(
                "dispatcher queued %d due accounts (%d already waiting)",
                fresh,
                len(queued) - fresh,
                extra={"event": "dispatched", "queued": fresh, "waiting": len(queued) - fresh},
            )
        return queued

    async def recover_stalled(self) -> list[str]:
        """Fail the jobs of workers silent for `stalled_after` seconds and queue their
        accounts; close the runs whose worker is gone (`close_orphan_runs`)."""
        async with self.pool.connection() as conn:
            closed = await close_orphan_runs(conn)
        if closed:
            logger.warning(
                "closed the runs of %d accounts whose worker is gone: %s",
                len(closed),
                closed,
                extra={"event": "orphan_runs_closed", "accounts": closed},
            )
        stalled = await self.manager.get_stalled_jobs(seconds_since_heartbeat=self.stalled_after)
        ids: list[int] = []
        accounts: list[str] = []
        for job in stalled:
            if job.id in self._running_jobs:
                continue
            try:
                await self.manager.finish_job(job, status=Status.FAILED, delete_job=False)
            except Exception:  # finished meanwhile: its worker was alive after all
                continue
            if job.task_name == SYNC_TASK and job.id is not None:
                ids.append(job.id)
                accounts.append(str(job.task_kwargs.get("account")))
        if ids:
            async with self.pool.connection() as conn:
                await mark_lost(conn, ids, accounts)
            logger.warning("recovered %d jobs of stalled workers: %s", len(ids), accounts)
            await self.enqueue(accounts)
        return accounts

    async def watch_stalled(
        self, interval: float, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    ) -> None:
        """Recover stalled workers' jobs every `interval` seconds, until cancelled."""
        while True:
            await sleep(interval)
            try:
                await self.recover_stalled()
            except Exception as exc:  # the next tick tries again; the worker goes on
                logger.warning("recovering stalled jobs failed: %s", exc)
            else:
                self.heartbeat_at = time.monotonic()

    async def run_worker(
        self,
        *,
        concurrency: int = 4,
        wait: bool = True,
        heartbeat: float = 10.0,
        install_signal_handlers: bool = True,
    ) -> None:
        """Dispatch once (a restarted worker picks up lost work at once), then work.

        SIGINT and SIGTERM stop it gently. When the job worker stops by itself (it lost the
        database), `StoreError` is raised once its running jobs ended, so that the supervisor
        restarts the process."""
        await self.dispatch()
        self._stop_requested = False
        self.manager.failure = None
        watchdog = asyncio.create_task(
            self.watch_stalled(max(0.1, min(heartbeat, self.stalled_after / 2)))
        )
        worker = asyncio.create_task(
            self.app.run_worker_async(
                concurrency=concurrency,
                wait=wait,
                name=f"{socket.gethostname()}:{os.getpid()}",
                update_heartbeat_interval=heartbeat,
                stalled_worker_timeout=self.stalled_after,
                # Ours (`_on_signal`): a stop we asked for is told from one it chose.
                install_signal_handlers=False,
                # The runs table is the history; succeeded jobs would only pile up.
                delete_jobs="successful",
            )
        )
        signals = (signal.SIGINT, signal.SIGTERM) if install_signal_handlers else ()
        loop = asyncio.get_running_loop()
        for sig in signals:
            loop.add_signal_handler(sig, self._on_signal, worker)
        self.worker_problem = None
        failure: BaseException | None = None
        try:
            await worker
        except asyncio.CancelledError:
            if not self._stop_requested or _cancelled(asyncio.current_task()):
                raise
        except Exception as exc:  # the fetch loop, or the worker's own bookkeeping
            failure = exc
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
            watchdog.cancel()
            await asyncio.gather(watchdog, return_exceptions=True)
            if self.worker_problem is None:
                self.worker_problem = "the job worker stopped"
        problem = self.manager.failure
        if problem is None and failure is not None:
            problem = describe(failure)
        if problem is None and wait and not self._stop_requested:
            problem = "it stopped by itself (see the log above)"
        if problem is not None:
            self.worker_problem = f"the job worker stopped: {problem}"
            raise StoreError(
                f"{self.worker_problem}; exiting so that its supervisor starts it again"
            ) from failure

    @property
    def job_worker_problem(self) -> str | None:
        """Why this process cannot run jobs now, or None while it can (`/healthz`)."""
        if self.manager.failure is not None:
            return f"the job worker stopped: {self.manager.failure}"
        return self.worker_problem

    def _on_signal(self, worker: asyncio.Task[None]) -> None:
        """SIGINT or SIGTERM: stop taking jobs; running ones end first."""
        logger.info("stop requested: finishing the running jobs")
        self._stop_requested = True
        self.worker_problem = "the job worker is stopping"
        worker.cancel()

    async def sync(self, name: str, *, job_id: int | None = None, worker: str | None = None) -> str:
        """Sync one account now and record the run, holding the account's lock; its status."""
        if job_id is not None:
            self._running_jobs.add(job_id)
        try:
            return await self._sync(name, job_id, worker)
        finally:
            if job_id is not None:
                self._running_jobs.discard(job_id)

    async def _sync(self, name: str, job_id: int | None, worker: str | None) -> str:
        async with self.pool.connection() as conn:
            try:
                started = await start_run(conn, name, job_id, worker)
            except BaseException:
                await conn.close()  # it may hold the account's lock: never pooled again
                raise
            if started is None:
                logger.info("account %r was removed before its job ran", name)
                return "gone"
            progress = _Progress(self.pool, started.run_id)
            run = self.account_run(started.account, started.failures, progress)
            # The account's lock as `start_run` took it (or found it held).
            run = attrs.evolve(run, lock=lambda: nullcontext(started.locked))
            try:
                outcome = await run.run()
            except asyncio.CancelledError:
                stopped = RunOutcome(name, "error", error="stopped: the worker shut down", due_in=0)
                finishing = asyncio.ensure_future(self._finish(conn, started, stopped))
                try:
                    await asyncio.shield(finishing)
                except asyncio.CancelledError:
                    await finishing  # `conn` holds the lock: it goes back to the pool after
                raise
            finally:
                await progress.stop()
            await self._finish(conn, started, outcome)
        if outcome.status == "error":
            self.failed_runs += 1
        return outcome.status

    def account_run(
        self, account: Account, failures: int = 0, *observers: RunObserver
    ) -> AccountRun:
        """The run of `account` as this worker makes it; `sync` gives it the account's lock.
        The worker's runs share one HTTP session, with no cookies (accounts share it)."""
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())
        return AccountRun(
            account=account.name,
            base_url=account.base_url,
            auth=account.credentials(),
            open_store=lambda: PostgresStore(self.pool, account=account.name, migrate=False),
            new_budget=lambda: ia.RateBudget(
                account.hourly_limit, key=account.host, store=self.budget_store
            ),
            format=account.format,
            ca_file=account.ca_file,
            secret_policy=self.secret_policy,
            concurrency=_ENGINE_CONCURRENCY,
            session=self._http,
            observers=(*observers, *self.observers),
            schedule=functools.partial(
                next_due,
                every=account.every_seconds,
                retry_after=_RETRY_AFTER,
                retry_cap=self.retry_cap,
                failures_before=failures,
            ),
        )

    async def _finish(self, conn: Conn, started: StartedRun, outcome: RunOutcome) -> None:
        """Record the outcome and let go of the lock on `conn`; if that fails, close `conn` (the
        server drops the lock) and retry on a new connection for about 15 s."""
        try:
            await finish_run(conn, started.run_id, outcome, unlock=started.locked)
            return
        except Exception as exc:
            await conn.close()
            failure: Exception = exc
        for wait in _FINISH_RETRIES:
            logger.warning(
                "recording run %d failed, again in %gs: %s", started.run_id, wait, failure
            )
            await asyncio.sleep(wait)
            try:
                async with self.pool.connection() as other:
                    await finish_run(other, started.run_id, outcome, unlock=False)
                return
            except Exception as exc:
                failure = exc
        raise failure


def _cancelled(task: asyncio.Task[Any] | None) -> bool:
    """Whether `task` itself is being cancelled (not only a task it awaits)."""
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return cancelling is not None and bool(cancelling())


class _Progress(RunObserver):
    """Writes a run's progress at most every `_PROGRESS_EVERY` seconds, off the engine's path."""

    def __init__(self, pool: Pool, run_id: int) -> None:
        self._pool = pool
        self._run_id = run_id
        self._latest: SyncProgress | None = None
        self._task: asyncio.Task[None] | None = None

    def progress(self, _run: AccountRun, progress: SyncProgress) -> None:
        self._latest = progress
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        try:
            await asyncio.sleep(_PROGRESS_EVERY)  # a shorter run never writes its progress
            latest = self._latest
            if latest is None:
                return
            async with self._pool.connection() as conn:
                await record_progress(
                    conn, self._run_id, latest.done, latest.total, latest.requests
                )
        except Exception as exc:  # progress is a view; the run goes on without it
            logger.debug("progress of run %d not written: %s", self._run_id, exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
