"""Runs: one row per attempt to sync an account (the operator's view); the account's next
due time is set in the outcome's transaction, so a run never ends without it."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from invoicing_async._account_run import RunOutcome
from invoicing_async._jobs import SQL
from invoicing_async._jobs.accounts import Account

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow

    Conn = AsyncConnection[TupleRow]

__all__ = [
    "AccountStatus",
    "StartedRun",
    "account_statuses",
    "close_orphan_runs",
    "finish_run",
    "mark_lost",
    "natural_key",
    "next_due",
    "problems",
    "record_progress",
    "start_run",
    "summary",
]

_DIGITS = re.compile(r"([0-9]+)")

#: Seconds a `locked` account waits before it is due again.
LOCKED_RETRY = 300.0


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


async def start_run(
    conn: Conn, account: str, job_id: int | None, worker: str | None
) -> StartedRun | None:
    """Record a run as started and try the account's lock on `conn` (held until
    `finish_run` on the same connection), in one statement; None when the account is
    gone. If it raises, `conn` may hold the lock: close it, never pool it again."""
    cursor = await conn.execute(SQL["start_run"], (account, job_id, worker))
    row = await cursor.fetchone()
    if row is None:
        return None
    *columns, failures, held, run_id = row
    return StartedRun(Account(*columns), int(failures), int(run_id), bool(held))


async def record_progress(conn: Conn, run_id: int, done: int, total: int, requests: int) -> None:
    """Move a running run's progress (batches committed so far)."""
    await conn.execute(SQL["record_progress"], (done, total, requests, run_id))


async def finish_run(conn: Conn, run_id: int, outcome: RunOutcome, *, unlock: bool) -> None:
    """Record the outcome, make the account due again (`outcome.due_in`; now when it has
    none) and, with `unlock`, let go of the account's lock `start_run` took on `conn`:
    one statement, so one transaction."""
    await conn.execute(
        SQL["finish_run"],
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
            outcome.account,
        ),
    )


async def mark_lost(conn: Conn, job_ids: list[int], accounts: list[str]) -> None:
    """Jobs whose worker died: their runs become `lost`, their accounts due now (one
    statement)."""
    await conn.execute(SQL["mark_lost"], (job_ids, accounts))


async def close_orphan_runs(conn: Conn) -> list[str]:
    """Runs left `running` by a worker that is gone (no one holds their account's lock)
    become `lost` and their accounts due now; the accounts, by name."""
    cursor = await conn.execute(SQL["close_orphan_runs"])
    return [str(row[0]) for row in await cursor.fetchall()]


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
    """Every account with its latest run, by name in natural order (`account-2` before
    `account-10`); only `account` when given."""
    cursor = await conn.execute(SQL["account_statuses"], (account, account))
    rows = [AccountStatus(*row) for row in await cursor.fetchall()]
    return sorted(rows, key=lambda row: natural_key(row.account))


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key reading runs of digits as numbers: `account-2` < `account-10`."""
    return tuple(
        (0, int(part)) if part.isascii() and part.isdigit() else (1, part)
        for part in _DIGITS.split(name)
        if part
    )


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
