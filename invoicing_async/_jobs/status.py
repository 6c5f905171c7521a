"""Runs: one row per attempt to sync an account, written as it starts, moves and ends.

The row is the operator's view (`invoicing-async status`) and the run's own record of its
outcome; an account's next due time is set in the same transaction as the outcome, so a
run never ends without the account becoming due again.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Literal

import attrs

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow

    Conn = AsyncConnection[TupleRow]

__all__ = [
    "AccountStatus",
    "Outcome",
    "RunStatus",
    "account_statuses",
    "finish_run",
    "mark_lost",
    "record_progress",
    "start_run",
]

RunStatus = Literal["complete", "incomplete", "budget", "error", "locked", "lost"]


@attrs.frozen
class Outcome:
    """How a run ended, and when its account is due again (seconds from now)."""

    status: RunStatus
    due_in: float
    requests: int = 0
    created: int = 0
    updated: int = 0
    deleted: int = 0
    done: int = 0
    total: int = 0
    eta: float | None = None
    error: str | None = None


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


async def finish_run(conn: Conn, run_id: int, account: str, outcome: Outcome) -> None:
    """Record the outcome and make the account due again, in one transaction."""
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
            (max(0.0, outcome.due_in), account),
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

    def to_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        for key in ("due_at", "started_at", "finished_at"):
            data[key] = None if data[key] is None else data[key].isoformat()
        return data


async def account_statuses(conn: Conn) -> list[AccountStatus]:
    """Every account with its latest run, by name."""
    cursor = await conn.execute(
        "SELECT a.name, a.host, a.due_at, r.status, r.started_at, r.finished_at, r.requests,"
        " r.created, r.updated, r.deleted, r.done, r.total, r.eta_seconds, r.error, r.worker"
        " FROM invoicing_accounts a LEFT JOIN LATERAL ("
        "   SELECT * FROM invoicing_runs WHERE account = a.name ORDER BY id DESC LIMIT 1"
        " ) r ON true ORDER BY a.name"
    )
    return [AccountStatus(*row) for row in await cursor.fetchall()]
