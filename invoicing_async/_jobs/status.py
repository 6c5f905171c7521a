"""Runs: one row per attempt to sync an account (the operator's view); the account's next
due time is set in the outcome's transaction, so a run never ends without it."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from invoicing_async._account_run import RunOutcome
from invoicing_async._jobs.accounts import ACCOUNT_COLUMNS, Account
from invoicing_async._postgres import locks

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow

    Conn = AsyncConnection[TupleRow]

__all__ = [
    "AccountStatus",
    "StartedRun",
    "account_statuses",
    "finish_run",
    "mark_lost",
    "next_due",
    "problems",
    "record_progress",
    "start_run",
    "summary",
]

#: Seconds a `locked` account waits before it is due again.
LOCKED_RETRY = 300.0
# The account `a`'s failures in a row: its error runs since the last run that got through
# (`locked` and `lost` runs say nothing of the account and neither end nor extend a streak).
_FAILURES = (
    "(SELECT count(*) FROM invoicing_runs f WHERE f.account = a.name AND f.status = 'error'"
    " AND f.id > coalesce((SELECT max(e.id) FROM invoicing_runs e WHERE e.account = a.name"
    " AND e.status IN ('complete', 'incomplete', 'budget')), 0))"
)


def next_due(
    outcome: RunOutcome, *, every: float, retry_after: float, retry_cap: float, failures_before: int
) -> float:
    """Seconds until the account is due again: failures in a row back off exponentially from
    `retry_after` up to `retry_cap`; any other outcome ends the streak."""
    if outcome.status == "complete":
        return every
    if outcome.status == "budget":
        return outcome.eta if outcome.eta is not None else 3600.0
    if outcome.status == "locked":
        return LOCKED_RETRY
    if outcome.status == "incomplete":
        return min(retry_after, every)
    return min(retry_cap, retry_after * 2.0 ** min(failures_before, 32))


@attrs.frozen
class StartedRun:
    """A run as `start_run` recorded it: its account, the account's failures in a row
    before it, its id, and whether it holds the account's lock."""

    account: Account
    failures: int
    run_id: int
    locked: bool


# One statement: the account, its failure streak, the account's advisory lock (session
# scoped: held by this connection until `finish_run`) and the run's row.
_START = (
    f"WITH acct AS (SELECT {ACCOUNT_COLUMNS} FROM invoicing_accounts WHERE name = %s),"
    " held AS (SELECT pg_try_advisory_lock(hashtextextended(%s, 0)) AS ok FROM acct),"
    " run AS (INSERT INTO invoicing_runs (account, job_id, worker)"
    "   SELECT name, %s, %s FROM acct RETURNING id)"
    f" SELECT a.*, {_FAILURES}, (SELECT ok FROM held), (SELECT id FROM run) FROM acct a"
)
# One statement: the outcome, the account's next due time, and the lock let go.
_FINISH = (
    "WITH run AS (UPDATE invoicing_runs SET status = %s, requests = %s, created = %s,"
    "   updated = %s, deleted = %s, done = %s, total = %s, eta_seconds = %s, error = %s,"
    "   finished_at = now(), updated_at = now() WHERE id = %s),"
    " due AS (UPDATE invoicing_accounts SET due_at = now() + make_interval(secs => %s)"
    "   WHERE name = %s)"
    " SELECT CASE WHEN %s THEN pg_advisory_unlock(hashtextextended(%s, 0)) END"
)


async def start_run(
    conn: Conn, account: str, job_id: int | None, worker: str | None
) -> StartedRun | None:
    """Record a run as started and try the account's lock on `conn` (held until
    `finish_run` on the same connection), in one statement; None when the account is
    gone. If it raises, `conn` may hold the lock: close it, never pool it again."""
    cursor = await conn.execute(_START, (account, locks.ACCOUNT_RUN.name(account), job_id, worker))
    row = await cursor.fetchone()
    if row is None:
        return None
    *columns, failures, held, run_id = row
    return StartedRun(Account(*columns), int(failures), int(run_id), bool(held))


async def record_progress(conn: Conn, run_id: int, done: int, total: int, requests: int) -> None:
    """Move a running run's progress (batches committed so far)."""
    await conn.execute(
        "UPDATE invoicing_runs SET done = %s, total = %s, requests = %s, updated_at = now()"
        " WHERE id = %s AND status = 'running'",
        (done, total, requests, run_id),
    )


async def finish_run(conn: Conn, run_id: int, outcome: RunOutcome, *, unlock: bool) -> None:
    """Record the outcome, make the account due again (`outcome.due_in`; now when it has
    none) and, with `unlock`, let go of the account's lock `start_run` took on `conn`:
    one statement, so one transaction."""
    await conn.execute(
        _FINISH,
        (
            outcome.status,
            outcome.requests,
            outcome.created,
            outcome.updated,
            outcome.deleted,
            outcome.done,
            outcome.total,
            outcome.eta,
            outcome.error,
            run_id,
            max(0.0, outcome.due_in or 0.0),
            outcome.account,
            unlock,
            locks.ACCOUNT_RUN.name(outcome.account),
        ),
    )


async def mark_lost(conn: Conn, job_ids: list[int], accounts: list[str]) -> None:
    """Jobs whose worker died: their runs become `lost`, their accounts due now."""
    async with conn.transaction():
        await conn.execute(
            "UPDATE invoicing_runs SET status = 'lost', finished_at = now(), updated_at = now(),"
            " error = 'the worker stopped answering (killed or cut off) during the run'"
            " WHERE job_id = ANY(%s) AND status = 'running'",
            (job_ids,),
        )
        await conn.execute(
            "UPDATE invoicing_accounts SET due_at = now() WHERE name = ANY(%s)", (accounts,)
        )


@attrs.frozen
class AccountStatus:
    """An account's line in `status`: its last run and when it is due (no secrets)."""

    account: str
    host: str
    due_at: dt.datetime | None
    run_status: str | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    requests: int | None
    created: int | None
    updated: int | None
    deleted: int | None
    done: int | None
    total: int | None
    eta_seconds: float | None
    error: str | None
    worker: str | None
    failures: int


async def account_statuses(conn: Conn, account: str | None = None) -> list[AccountStatus]:
    """Every account with its latest run, by name; only `account` when given."""
    cursor = await conn.execute(
        "SELECT a.name, a.host, a.due_at, r.status, r.started_at, r.finished_at, r.requests,"
        " r.created, r.updated, r.deleted, r.done, r.total, r.eta_seconds, r.error, r.worker,"
        f" {_FAILURES}"
        " FROM invoicing_accounts a LEFT JOIN LATERAL ("
        "   SELECT * FROM invoicing_runs WHERE account = a.name ORDER BY id DESC LIMIT 1"
        " ) r ON true WHERE %s::text IS NULL OR a.name = %s ORDER BY a.name",
        (account, account),
    )
    return [AccountStatus(*row) for row in await cursor.fetchall()]


def summary(rows: Sequence[AccountStatus]) -> str:
    """One line for `status --check` when nothing is wrong: how many accounts, by the
    outcome of their last run."""
    counts = Counter("never run" if r.run_status is None else r.run_status for r in rows)
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    noun = "account" if len(rows) == 1 else "accounts"
    return f"ok: {len(rows)} {noun}, none failing or overdue" + (f" ({parts})" if parts else "")


def problems(
    rows: Sequence[AccountStatus], *, overdue_margin: float, now: dt.datetime | None = None
) -> list[str]:
    """What `status --check` alerts on: accounts whose last run failed (or was lost), and
    accounts due more than `overdue_margin` seconds ago and not yet queued."""
    now = now or dt.datetime.now(dt.timezone.utc)
    found = []
    for row in rows:
        if row.run_status in ("error", "lost"):
            streak = f" ({row.failures} in a row)" if row.failures > 1 else ""
            found.append(f"{row.account}: last run {row.run_status}{streak}: {row.error}")
        elif row.due_at is not None:
            late = (now - row.due_at).total_seconds()
            if late > overdue_margin:
                found.append(f"{row.account}: overdue by {late:.0f}s")
    return found
