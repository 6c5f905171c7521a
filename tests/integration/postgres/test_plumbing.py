"""The PostgreSQL plumbing (`invoicing_async._postgres`): pools that fail fast with the
server's reason, one registry of advisory locks, and one migration runner that upgrades
databases of older releases.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import psycopg
import pytest

import invoicing_async as ia
from invoicing_async._cli import main
from invoicing_async._jobs.tasks import COMPONENTS
from invoicing_async._postgres import locks, migrations
from invoicing_async._postgres.connect import connection_pool
from invoicing_async.sync import PostgresStore
from tests.servers import PostgresServer, free_port

PACKAGE = Path(ia.__file__).parent


# -- connecting -----------------------------------------------------------------------------


def wrong_urls(server: PostgresServer) -> dict[str, tuple[str, str]]:
    """A wrong URL of each kind -> (the URL, what the first line must say)."""
    port = server.port
    return {
        "role": (f"postgresql://nobody@127.0.0.1:{port}/postgres", 'role "nobody" does not exist'),
        "database": (server.url("no_such_db"), 'database "no_such_db" does not exist'),
        "port": (f"postgresql://me:hunter2@127.0.0.1:{free_port()}/db", "Connection refused"),
    }


@pytest.mark.parametrize("kind", ["role", "database", "port"])
async def test_a_wrong_url_fails_within_3s_with_the_reason_first(
    postgres_server: PostgresServer, kind: str
) -> None:
    url, reason = wrong_urls(postgres_server)[kind]
    pool = connection_pool(url)
    with pytest.raises(ia.StoreError) as caught:
        await pool.open()
    # Failed on the server's answer, not by waiting out the pool's timeout.
    assert "PoolTimeout" not in repr(caught.value.__cause__)
    first = str(caught.value).splitlines()[0]
    assert reason in first
    assert "postgresql://" in first
    assert "hunter2" not in first
    assert pool.closed
    store = PostgresStore(url, account="acme")
    with pytest.raises(ia.StoreError, match=re.escape(reason)) as caught:
        await store.revisions()
    assert "PoolTimeout" not in repr(caught.value.__cause__)
    await store.close()


def test_the_commands_say_why_a_database_url_is_wrong(
    postgres_server: PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #26: a wrong URL took 10 s and ended in 'PoolTimeout', the reason above it."""
    for url, reason in wrong_urls(postgres_server).values():
        assert main(["status", "--database-url", url]) == 1
        err = capsys.readouterr().err
        assert reason in err.splitlines()[0], err
        assert "PoolTimeout" not in err


async def test_a_pool_opens_once_reachable(postgres_url: str) -> None:
    async with (
        connection_pool(postgres_url, application_name="ia-test") as pool,
        pool.connection() as conn,
    ):
        cursor = await conn.execute("SHOW application_name")
        assert await cursor.fetchone() == ("ia-test",)
        assert conn.autocommit


# -- advisory locks -------------------------------------------------------------------------


def test_every_advisory_lock_key_comes_from_the_registry() -> None:
    """No lock key written outside `locks`: Python passes one of its names, SQL files use a
    `KeyedLock`'s prefix."""
    prefixes = {v.prefix for v in vars(locks).values() if isinstance(v, locks.KeyedLock)}
    keys = {v for v in vars(locks).values() if isinstance(v, int)}
    assert len(prefixes) == 2
    assert locks.MIGRATIONS in keys
    seen = 0
    for path in PACKAGE.rglob("*"):
        if path.suffix not in (".py", ".sql") or path.parent.name == "_postgres":
            continue
        text = path.read_text()
        for match in re.finditer(r"pg_(?:try_)?advisory_(?:xact_)?(?:un)?lock\((.*)", text):
            seen += 1
            argument = match[1]
            assert not re.search(r"\d{6,}", argument), f"{path}: a key written out: {match[0]}"
            if path.suffix == ".sql":
                assert any(f"'{p}'" in argument for p in prefixes), f"{path}: {match[0]}"
            else:
                assert "%s" in argument, f"{path}: {match[0]}"
        if path.suffix == ".py":
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Constant) and node.value in keys:
                    raise AssertionError(f"{path}: lock key {node.value} outside the registry")
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    assert not any(node.value.startswith(p) for p in prefixes), path
    assert (
        seen >= 4
    )  # the budget's (taken in one function), the account lock and unlock, migrations


# -- migrations -----------------------------------------------------------------------------


def test_each_component_ships_its_migrations_as_sql_files() -> None:
    for component in COMPONENTS:
        files = sorted((PACKAGE / component.package.split(".")[1] / "sql").glob("*.sql"))
        assert [m.name for m in component.migrations] == [f.stem for f in files]
        assert [m.version for m in component.migrations] == list(range(1, len(files) + 1))
        assert all("CREATE" in m.sql for m in component.migrations[:1])
    # No DDL left in Python strings: it all lives in the .sql files.
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not re.search(r"\bCREATE (TABLE|INDEX|OR REPLACE FUNCTION)", node.value), (
                    f"DDL in {path}"
                )


async def test_migrations_run_in_one_transaction(empty_postgres_url: str) -> None:
    """A failing migration leaves nothing of the run behind: not even the store's tables,
    applied before it in the same transaction."""
    with psycopg.connect(empty_postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoicing_budget_units (key int)")  # not the budget's
    with pytest.raises(ia.StoreError, match="cannot migrate"):
        await migrations.migrate(empty_postgres_url, COMPONENTS)
    with psycopg.connect(empty_postgres_url) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables").fetchall()}
    assert "invoicing_invoices" not in tables
    assert "invoicing_migrations" not in tables


def test_the_plumbing_imports_nothing_of_ours_but_errors() -> None:
    """`_postgres` sits below every layer that uses PostgreSQL (beside it only the errors
    and `_extras`; under it only `_text`, which imports nothing of ours)."""
    for path in (PACKAGE / "_postgres").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            ours = [n for n in names if n.startswith("invoicing_async")]
            assert all(
                n in ("invoicing_async.errors", "invoicing_async._extras", "invoicing_async._text")
                or n.startswith("invoicing_async._postgres")
                for n in ours
            ), f"{path.name} imports {ours}"
