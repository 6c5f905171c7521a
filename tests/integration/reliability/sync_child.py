"""A sync run in its own process, for the crash tests: `run`, in a child forked from the
tests' forkserver (tests/forked.py).

`db` is a SQLite path, or a ``postgresql://`` URL (the store's account is "crashy").
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Any

import invoicing_async as ia
from invoicing_async.sync import PostgresStore, SQLiteStore, SyncEngine


def open_store(db: str, account: str = "crashy") -> SQLiteStore | PostgresStore:
    """The store at `db`: a ``postgresql://`` URL, else a SQLite path."""
    if db.startswith("postgresql://"):
        return PostgresStore(db, account=account)
    return SQLiteStore(db)


async def main(
    base_url: str,
    user: str,
    password: str,
    ca: str,
    db: str,
    started: Callable[[], object],
) -> None:
    context = ssl.create_default_context(cafile=ca)
    async with (
        ia.InvoicingClient(
            base_url,
            auth=ia.BasicAuth(user, password),
            format="json",
            ssl=context,
            budget=ia.RateBudget(limit=100_000),
        ) as client,
        open_store(db) as store,
    ):
        started()
        await SyncEngine(client, store, concurrency=1).run()


def run(args: tuple[str, str, str, str, str], started: Any) -> None:
    """In a forked child: the run, setting the `started` event once client and store are open."""
    asyncio.run(main(*args, started=started.set))
