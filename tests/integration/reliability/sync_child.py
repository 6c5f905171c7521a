"""A sync run in its own process, for the crash tests: argv = base_url user password ca db.

`db` is a SQLite path, or a ``postgresql://`` URL (the store's account is "crashy").
"""

from __future__ import annotations

import asyncio
import ssl
import sys

import invoicing_async as ia
from invoicing_async.sync import PostgresStore, SQLiteStore, SyncEngine


def open_store(db: str, account: str = "crashy") -> SQLiteStore | PostgresStore:
    """The store at `db`: a ``postgresql://`` URL, else a SQLite path."""
    if db.startswith("postgresql://"):
        return PostgresStore(db, account=account)
    return SQLiteStore(db)


async def main(base_url: str, user: str, password: str, ca: str, db: str) -> None:
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
        print("started", flush=True)
        await SyncEngine(client, store, concurrency=1).run()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
