"""Runs: one row per attempt to sync an account, written as it starts, moves and ends.

The row is the operator's view (`invoicing-async status`) and the run's own record of its
outcome; an account's next due time is set in the same transaction as the outcome, so a
run never ends without the account becoming due again.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._account_run import RunOutcome

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow

    Conn = AsyncConnection[TupleRow]

__all__ = [
    "AccountStatus",
    "account_statuses",
    "failure_streak",
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
    outcome: RunOutcome,
    *,
    every: float,
    retry_after: float,
    retry_cap: float,
    failures_before: int,
) -> float:
    """Seconds until the account is due again after this outcome.

    A failing account (wrong password, host down) backs off exponentially: `retry_after`,
    then twice that, and so on up to `retry_cap`, counting the failures in a row before
    this one; any other outcome ends the streak.
    """
    if outcome.status == "complete":
        return every
    if outcome.status == "budget":
        return outcome.eta if outcome.eta is not None else 3600.0
    if outcome.status == "locked":
        return LOCKED_RETRY
    if outcome.status == "incomplete":
        return min(retry_after, every)
    return min(retry_cap, retry_after * 2.0 ** min(failures_before, 32))


async def failure_streak(conn: Conn, account: str) -> int:
    """How many of the account's latest runs failed in a row."""
    cursor = await conn.execute(
        f"SELECT {_FAILURES} FROM invoicing_accounts a WHERE a.name = %s", (account,)
    )
    row = await cursor.fetchone()
    return 0 if row is None else int(row[0])


async def start_run(conn: Conn, account: str, job_id: int | None, worker: str | None) -> int:
    """Record a run as started; its id."""
    cursor = await conn.execute(
        "INSERT INTO invoicing_runs (account, job_id, worker) VALUES (%s, %s, %s) RETURNING id",
        (account, job_id, worker),
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def record_progress(conn: Conn, run_id: int, done: int, total: int, requests: int) -> None:
    """Move a running run's progress (batches committed so far)."""
    await conn.execute(
        "UPDATE invoicing_runs SET done = %s, total = %s, requests = %s, updated_at = now()"
        " WHERE id = %s AND status = 'running'",
        (done, total, requests, run_id),
    )


async def finish_run(conn: Conn, run_id: int, outcome: RunOutcome) -> None:
    """Record the outcome and make the account due again (`outcome.due_in`; now when it
    has none), in one transaction."""
    async with conn.transaction():
        await conn.execute(
            "UPDATE invoicing_runs SET status = %s, requests = %s, created = %s, updated = %s,"
            " deleted = %s, done = %s, total = %s, eta_seconds = %s, error = %s,"
            " finished_at = now(), updated_at = now() WHERE id = %s",
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
            ),
        )
        await conn.execute(
            "UPDATE invoicing_accounts SET due_at = now() + make_interval(secs => %s)"
            " WHERE name = %s",
            (max(0.0, outcome.due_in or 0.0), outcome.account),
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

    def to_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        for key in ("due_at", "started_at", "finished_at"):
            data[key] = None if data[key] is None else data[key].isoformat()
        return data


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
    rows: Sequence[AccountStatus],
    *,
    overdue_margin: float,
    now: dt.datetime | None = None,
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
