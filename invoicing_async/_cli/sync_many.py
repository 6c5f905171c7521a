"""`sync-many`: many accounts synced concurrently into SQLite files on one machine; a lock
file beside each store makes an overlapping run report the account as `locked`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, get_args

from filelock import FileLock, Timeout

import invoicing_async as ia
from invoicing_async._account_run import AccountRun, RunOutcome, RunStatus, exit_code
from invoicing_async._cli.accounts_file import AccountConfig
from invoicing_async._secrets import SecretPolicy
from invoicing_async._sync.sqlite import SQLiteStore

__all__ = ["StoreLock", "summary", "sync_many"]


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

    @asynccontextmanager
    async def held(self) -> AsyncIterator[bool]:
        """The lock for a run: yields whether it was taken (released on the way out)."""
        if not self.acquire():
            yield False
            return
        try:
            yield True
        finally:
            self.release()


async def sync_many(
    accounts: Sequence[AccountConfig],
    *,
    concurrency: int = 8,
    wait_for_budget: bool = False,
    on_done: Callable[[RunOutcome], None] | None = None,
    budget_url: str | None = None,
    reserve: int = 0,
) -> list[RunOutcome]:
    """Sync every account under its store lock, `concurrency` at a time; outcomes in the
    file's order, every failure one of them. The file's secret references are unconfined
    (its writer runs the command), files still checked."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(config: AccountConfig) -> RunOutcome:
        async with gate:
            config.db.parent.mkdir(parents=True, exist_ok=True)
            outcome = await AccountRun(
                account=config.name,
                base_url=config.base_url,
                auth=config.credentials(),
                open_store=lambda: SQLiteStore(config.db),
                new_budget=lambda: ia.RateBudget(shared=budget_url, reserve=reserve),
                format=config.format,
                ca_file=config.ca_file,
                lock=StoreLock(config.db).held,
                secret_policy=SecretPolicy.unconfined(),
                wait_for_budget=wait_for_budget,
            ).run()
        if on_done is not None:
            on_done(outcome)
        return outcome

    return list(await asyncio.gather(*(one(c) for c in accounts)))


def summary(outcomes: Sequence[RunOutcome]) -> dict[str, Any]:
    """The JSON summary: one entry per account, counts per status, requests spent."""
    counts = dict.fromkeys((s for s in get_args(RunStatus) if s != "lost"), 0)
    for outcome in outcomes:
        counts[outcome.status] += 1
    return {
        "accounts": [o.to_dict() for o in outcomes],
        "counts": counts,
        "requests": sum(o.requests for o in outcomes),
        "exit_code": exit_code(outcomes),
    }
