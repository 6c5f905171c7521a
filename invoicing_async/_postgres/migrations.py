"""The one migration runner: each component's ``sql/NNNN_name.sql`` files, applied in order
under one lock (processes starting at once apply each exactly once). Versions live in
``invoicing_migrations``; a database newer than this package is refused untouched."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import weakref
from collections.abc import AsyncIterator, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._postgres import locks
from invoicing_async._postgres.connect import require_psycopg
from invoicing_async._postgres.reasons import error_for, where_of
from invoicing_async.errors import StoreError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow

    Conn = AsyncConnection[TupleRow]

__all__ = ["Component", "Migration", "apply", "check", "migrate", "once_per_pool", "read_versions"]

_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


@attrs.frozen
class Migration:
    """One step of a component's schema: applied in order, once, in one transaction."""

    component: str
    version: int
    name: str
    sql: str


@attrs.frozen
class Component:
    """A part of the package with tables and migrations of its own; `sign`: a table that,
    found without the version table, means the tables are not ours."""

    name: str
    package: str
    sign: str | None = None

    @property
    def migrations(self) -> tuple[Migration, ...]:
        """The component's migrations, from its package's ``sql/`` directory."""
        return _load(self.name, self.package)

    @property
    def latest(self) -> int:
        return len(self.migrations)


@functools.cache
def _load(component: str, package: str) -> tuple[Migration, ...]:
    found = []
    for entry in (resources.files(package) / "sql").iterdir():
        match = _FILE.fullmatch(entry.name)
        if match:
            version = int(match[1])
            found.append(Migration(component, version, entry.name[:-4], entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{package}/sql: migrations must be numbered 0001, 0002, … without gaps")
    return tuple(found)


async def _tables(conn: Conn, names: Sequence[str]) -> set[str]:
    """Which of `names` exist in the current schema (a scan of pg_class: to_regclass() may
    see a stale cache while waiting on the advisory lock)."""
    cursor = await conn.execute(
        "SELECT c.relname FROM pg_catalog.pg_class c"
        " WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY(%s)",
        (list(names),),
    )
    return {str(row[0]) for row in await cursor.fetchall()}


async def read_versions(conn: Conn, components: Sequence[Component], where: str) -> dict[str, int]:
    """Each component's version in the database (0 when none); `StoreError` for a newer one,
    or for a component's tables without any version table."""
    signs = [c.sign for c in components if c.sign]
    tables = await _tables(conn, ["invoicing_migrations", *signs])
    recorded: dict[str, int] = {}
    if "invoicing_migrations" in tables:
        cursor = await conn.execute(
            "SELECT component, max(version) FROM invoicing_migrations GROUP BY component"
        )
        recorded = {str(c): int(v) for c, v in await cursor.fetchall()}
    else:
        for component in components:
            if component.sign in tables:
                raise StoreError(
                    f"{where} has an {component.sign} table but no invoicing_migrations "
                    "table: it was not made by invoicing-async; use another database or "
                    "schema (the tables were not changed)"
                )
    versions = {c.name: recorded.get(c.name, 0) for c in components}
    for component in components:
        if versions[component.name] > component.latest:
            raise StoreError(
                f"{where} has {component.name} schema version {versions[component.name]}, "
                f"newer than this package's {component.latest}: upgrade invoicing-async; "
                "the database was not changed"
            )
    return versions


# Per pool, the components whose schema was found (or made) current through it, and a
# lock so that stores opening at once check it once: not at every open (5 statements).
_CURRENT: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_CHECKING: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def once_per_pool(pool: Any, components: Sequence[Component]) -> AsyncIterator[bool]:
    """Yields whether the components' schemas still need a check through `pool`; when
    the block then ends without an error, they are known current for the pool's life."""
    names = {c.name for c in components}
    if names <= _CURRENT.get(pool, set()):
        yield False
        return
    async with _CHECKING.setdefault(pool, asyncio.Lock()):
        needed = not names <= _CURRENT.get(pool, set())
        yield needed
        if needed:
            _CURRENT.setdefault(pool, set()).update(names)


async def check(conn: Conn, components: Sequence[Component], where: str) -> None:
    """Refuse (`StoreError`) a database whose schema is not this package's; reads only."""
    async with conn.transaction():
        versions = await read_versions(conn, components, where)
    for component in components:
        if versions[component.name] < component.latest:
            raise StoreError(
                f"{where} has {component.name} schema version {versions[component.name]}, "
                f"older than this package's {component.latest}: run `migrate` "
                "(invoicing-async db migrate) as a role that may create tables"
            )


async def apply(conn: Conn, components: Sequence[Component], where: str) -> list[Migration]:
    """Bring the components' schemas up to date; the migrations applied now (read first
    without locking, then again under the lock)."""
    async with conn.transaction():
        versions = await read_versions(conn, components, where)
    if all(versions[c.name] == c.latest for c in components):
        return []
    applied: list[Migration] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (locks.MIGRATIONS,))
        versions = await read_versions(conn, components, where)
        # The runner's own table, ``invoicing_migrations``.
        await conn.execute((resources.files(__package__) / "sql" / "migrations.sql").read_text())
        for component in components:
            for migration in component.migrations:
                if migration.version > versions[component.name]:
                    await conn.execute(migration.sql)
                    await conn.execute(
                        "INSERT INTO invoicing_migrations (component, version, name)"
                        " VALUES (%s, %s, %s)",
                        (component.name, migration.version, migration.name),
                    )
                    applied.append(migration)
    return applied


async def migrate(
    url: str, components: Sequence[Component], *, timeout: float = 60.0
) -> list[Migration]:
    """Bring the components' schemas at `url` up to date; those applied (safe to run at once
    from several processes; a newer database is refused)."""
    require_psycopg()
    import psycopg

    from invoicing_async._postgres.pool import connect

    where = where_of(url)

    async def run() -> list[Migration]:
        async with await connect(url, {"autocommit": True}) as conn:
            return await apply(conn, components, where)

    try:
        return await asyncio.wait_for(run(), timeout)
    except asyncio.TimeoutError as exc:
        raise StoreError(
            f"cannot migrate {where}: no answer within {timeout:g}s (check that the server "
            "is up and responsive, and that nothing holds a lock on the invoicing_ tables)"
        ) from exc
    except psycopg.Error as exc:
        raise error_for("cannot migrate", where, exc) from exc
