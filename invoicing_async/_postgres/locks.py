"""Every PostgreSQL advisory lock this package takes, in one place: fixed keys are large
numbers unlikely elsewhere, keys per name hashed by the server from a prefix of ours."""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["ACCOUNT_RUN", "BUDGET_KEY", "DISPATCH", "MIGRATIONS", "KeyedLock"]

MIGRATIONS: Final = 7305841960129
"""Transaction-scoped, while any component's schema is migrated (`migrations.apply`) and
while procrastinate's schema is installed: processes starting at once apply each
migration exactly once, the others wait and find it done."""

DISPATCH: Final = 7305841960131
"""Session-scoped, taken with ``pg_try_advisory_lock`` by a worker's dispatcher while it
queues the due accounts (`_jobs.tasks.Jobs.dispatch`): two workers starting together do
not both queue them (the second would take the first's accounts, between its update and
its defer, for orphans), and each logs what it queued itself."""


@attrs.frozen
class KeyedLock:
    """A family of locks, one per name: the key is ``hashtextextended(prefix || name, 0)``,
    written so in the SQL files that take them."""

    prefix: str


ACCOUNT_RUN: Final = KeyedLock("invoicing-account:")
"""Session-scoped, held by a run of one account for its whole run (`_jobs.tasks`, its SQL in
``_jobs/queries.sql``): a worker declared lost that was only cut off cannot sync beside
its successor. Taken with ``pg_try_advisory_lock``: a second run finds it held and records
itself as "locked"."""

BUDGET_KEY: Final = KeyedLock("invoicing-budget:")
"""Transaction-scoped, inside the budget's SQL functions
(``_budget/sql/0001_budget.sql``): takers and settlers of one budget key
(one host) are serialized, so a unit is never granted twice."""
