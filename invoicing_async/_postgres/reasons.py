"""PostgreSQL's failures in words: where (a URL without its password), psycopg's cause on
one line, and what to check. Imports nothing of psycopg until a URL is parsed."""

from __future__ import annotations

import functools

from invoicing_async.errors import StoreError

__all__ = ["describe", "error_for", "where_of"]


# SQLSTATE (or its two-letter class) -> what to check.
_ADVICE: dict[str, str] = {
    "57014": "a statement ran past statement_timeout: check the server's load and locks, "
    "or raise timeout=",
    "42501": "the role lacks a privilege on the invoicing_ tables: grant it, or run "
    "migrate as the tables' owner",
    "42P01": "the store's tables are missing: run migrate (invoicing-async db migrate)",
    "3D000": "the database does not exist: create it (CREATE DATABASE) or fix the URL",
    "28P01": "authentication failed: check the user and password of the URL",
    "28000": "the server refused this user or host: check the URL's user (does the role "
    "exist?) and pg_hba.conf",
    "53100": "the server's disk is full: free space and run again (nothing of this batch was kept)",
    "53300": "the server has too many connections: lower max_connections of the stores "
    "or share one pool",
    "25006": "the server is read-only (a standby?): point the URL at the primary",
    "40P01": "a deadlock with another writer: run again (nothing of this call was kept)",
    "40001": "a conflict with another writer: run again (nothing of this call was kept)",
    "55P03": "another session holds a lock on the invoicing_ tables: find it in pg_stat_activity",
    "57P01": "the server is shutting down: run again once it is back",
    "08": "the connection failed: check that the server is up, the URL's host and port, "
    "and the network",
    "53": "the server is out of resources (memory, disk, connections): check its logs",
}


@functools.lru_cache(maxsize=64)  # a worker asks for its one URL's at every run
def where_of(conninfo: str) -> str:
    """``postgresql://user@host:port/dbname`` of a URL or conninfo, without a password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(conninfo)
    except Exception:  # a malformed URL: the connection will say what is wrong
        return "PostgreSQL"
    host = str(parts.get("host") or parts.get("hostaddr") or "localhost")
    port = str(parts.get("port") or 5432)
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"postgresql://{user}{host}:{port}/{parts.get('dbname') or ''}"


def describe(exc: BaseException) -> str:
    """psycopg's message on one line; for a refused connection, the server's reason first."""
    text = " ".join(str(exc).split())
    if getattr(exc, "sqlstate", None) is None and " failed: " in text:
        # 'connection failed: connection to server at "h", port 5432 failed: FATAL: ...'
        return text.rsplit(" failed: ", 1)[1].removeprefix("FATAL: ")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# A refused connection has no SQLSTATE: the server's words -> the SQLSTATE they mean.
_REFUSALS = (
    ("FATAL: role ", "28000"),
    ("FATAL: database ", "3D000"),
    ("password authentication failed", "28P01"),
    ("no pg_hba.conf entry", "28000"),
)


def _advice(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "PoolTimeout":
        return (
            "no connection came free or could be made in time: check that the server is up "
            "and reachable, or raise max_connections / pool_timeout"
        )
    if name == "PoolClosed":
        return "the connection pool is closed or was never opened: open it (await pool.open())"
    state = getattr(exc, "sqlstate", None) or ""
    if not state and name == "OperationalError":
        text = " ".join(str(exc).split())
        for words, meaning in _REFUSALS:
            if words in text:
                return _ADVICE[meaning]
    for key in (state, state[:2]):
        if key in _ADVICE:
            return _ADVICE[key]
    if name == "OperationalError":  # no SQLSTATE: the connection itself failed
        return _ADVICE["08"]
    return "see the PostgreSQL message"


def error_for(doing: str, where: str, exc: BaseException) -> StoreError:
    """A `StoreError` naming the database, psycopg's cause and what to check."""
    return StoreError(f"{doing} {where}: {describe(exc)} ({_advice(exc)})")
