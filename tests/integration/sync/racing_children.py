"""Children that race their siblings (and the test) on a new SQLite file or a new schema.

Forked from one forkserver (tests/forked.py) that imported the package once, and released
together by a barrier: the race is the creation or the migration itself, not interpreters importing the
package (0.3-0.5 s of CPU each) and arriving whenever their imports end.
"""

from __future__ import annotations

import asyncio
from typing import Any

from invoicing_async.sync import PostgresStore, SQLiteStore
from tests.forked import GUARD


def create(path: str, barrier: Any, errors: Any) -> None:
    """Wait for the siblings, then create the store at `path`; a failure goes to `errors`."""
    barrier.wait(GUARD)
    try:
        SQLiteStore(path)
    except BaseException as exc:
        errors.put(f"{type(exc).__name__}: {exc}")
        raise


def migrate(url: str, barrier: Any, results: Any) -> None:
    """Wait for the others, then migrate `url`: ("applied", versions) or ("error", why)."""
    barrier.wait(GUARD)
    try:
        applied = asyncio.run(PostgresStore.migrate(url))
    except BaseException as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))
        raise
    results.put(("applied", str(applied)))
