"""`sync-many`: many accounts synced concurrently into SQLite files on one machine.

Each account's store is guarded by a lock file beside it (`filelock`), so overlapping
runs (a slow night, a cron job started twice) never sync one account twice: the later
run reports the account as `locked` and leaves it alone.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
from filelock import FileLock, Timeout

import invoicing_async as ia
from invoicing_async._cli.accounts_file import AccountConfig
from invoicing_async._sync.engine import SyncEngine
from invoicing_async._sync.report import SyncReport
from invoicing_async._sync.sqlite import SQLiteStore

__all__ = ["AccountOutcome", "StoreLock", "exit_code", "summary", "sync_account", "sync_many"]

Status = Literal["complete", "incomplete", "budget", "locked", "error"]


class StoreLock:
    """An exclusive, non-waiting lock on one store file, held for a whole run."""

    def __init__(self, store_path: Path) -> None:
        self.path = Path(f"{store_path}.lock")
        self._lock = FileLock(self.path)

    def acquire(self) -> bool:
        """Take the lock if no other run holds it; False when one does."""
        try:
            self._lock.acquire(blocking=False)
        except Timeout:
            return False
        return True

    def release(self) -> None:
        self._lock.release()


@attrs.frozen
class AccountOutcome:
    """What became of one account in a `sync-many` run."""

    name: str
    status: Status
    report: SyncReport | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "error": self.error,
            "report": None if self.report is None else self.report.to_dict(),
        }


async def sync_account(
    config: AccountConfig,
    *,
    wait_for_budget: bool = False,
    budget_url: str | None = None,
    reserve: int = 0,
) -> AccountOutcome:
    """Sync one account under its store lock; every failure becomes an outcome.

    `budget_url` shares each account's budget (keyed by its host) with other processes.
    """
    config.db.parent.mkdir(parents=True, exist_ok=True)
    lock = StoreLock(config.db)
    if not lock.acquire():
        return AccountOutcome(config.name, "locked", error=f"another run holds {lock.path}")
    budget = None
    try:
        budget = ia.RateBudget(shared=budget_url, reserve=reserve)
        context = ssl.create_default_context(cafile=str(config.ca_file)) if config.ca_file else None
        async with (
            ia.InvoicingClient(
                config.base_url,
                auth=config.auth(),
                format=config.format,
                ssl=context,
                budget=budget,
            ) as client,
            SQLiteStore(config.db) as store,
        ):
            report = await SyncEngine(client, store, wait_for_budget=wait_for_budget).run()
    except ia.RateLimitExceeded as exc:
        return AccountOutcome(config.name, "budget", error=str(exc))
    except (ia.InvoicingError, OSError, ssl.SSLError, ValueError) as exc:
        return AccountOutcome(config.name, "error", error=str(exc))
    finally:
        lock.release()
        if budget is not None:
            await budget.close()
    if report.complete:
        return AccountOutcome(config.name, "complete", report)
    status: Status = "budget" if report.stopped_for_budget else "incomplete"
    return AccountOutcome(config.name, status, report)


async def sync_many(
    accounts: Sequence[AccountConfig],
    *,
    concurrency: int = 8,
    wait_for_budget: bool = False,
    on_done: Callable[[AccountOutcome], None] | None = None,
    budget_url: str | None = None,
    reserve: int = 0,
) -> list[AccountOutcome]:
    """Sync every account, `concurrency` at a time; outcomes in the file's order."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(config: AccountConfig) -> AccountOutcome:
        async with gate:
            outcome = await sync_account(
                config, wait_for_budget=wait_for_budget, budget_url=budget_url, reserve=reserve
            )
        if on_done is not None:
            on_done(outcome)
        return outcome

    return list(await asyncio.gather(*(one(c) for c in accounts)))


def exit_code(outcomes: Sequence[AccountOutcome]) -> int:
    """As `sync`: 1 if any account failed, else 3 if any is not complete, else 0."""
    statuses = {o.status for o in outcomes}
    if "error" in statuses:
        return 1
    return 0 if statuses <= {"complete"} else 3


def summary(outcomes: Sequence[AccountOutcome]) -> dict[str, Any]:
    """The JSON summary: one entry per account, counts per status, requests spent."""
    counts = dict.fromkeys(("complete", "incomplete", "budget", "locked", "error"), 0)
    for outcome in outcomes:
        counts[outcome.status] += 1
    return {
        "accounts": [o.to_dict() for o in outcomes],
        "counts": counts,
        "requests": sum(o.report.requests for o in outcomes if o.report is not None),
        "exit_code": exit_code(outcomes),
    }
