"""Accounts in PostgreSQL: what to sync and where its secrets live (``env:VAR`` or
``file:/path``, read by the worker under its own `SecretPolicy`), never the secrets."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

import invoicing_async as ia
from invoicing_async._account_run import Credentials, load_ca
from invoicing_async._jobs import SQL
from invoicing_async._secrets import SecretError, parse_secret_ref
from invoicing_async._transport.urls import account_host, validate_base_url

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow

    Conn = AsyncConnection[TupleRow]

__all__ = [
    "Account",
    "AccountError",
    "add_account",
    "list_accounts",
    "remove_account",
    "upsert_accounts",
]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class AccountError(ia.InvoicingError):
    """An account cannot be added or used; the message names the account and why."""


@attrs.frozen
class Account:
    """One row of `invoicing_accounts` (fields in column order): references to secrets,
    not secrets."""

    name: str
    base_url: str
    host: str
    format: ia.Format = "xml"
    auth: str = "basic"
    username: str = ""
    secret_ref: str = ""
    token: str | None = None
    token_secret_ref: str | None = None
    ca_file: str | None = None
    hourly_limit: int = 350
    every_seconds: int = 86400
    due_at: dt.datetime | None = None
    created_at: dt.datetime | None = None

    def credentials(self) -> Credentials:
        """The account's credentials by reference (the run reads the secrets)."""
        return Credentials(
            self.username,
            self.secret_ref,
            oauth1=self.auth == "oauth1",
            token=self.token,
            token_secret=self.token_secret_ref,
        )


def new_account(
    name: str,
    *,
    base_url: str,
    credentials: Credentials,
    format: str = "xml",
    ca_file: str | None = None,
    hourly_limit: int = 350,
    every_seconds: int = 86400,
) -> Account:
    """An account checked for `add_account`: name, URL (as the client checks it: https, or
    http to loopback only), format, references, and that its CA file can be loaded."""
    if not _NAME.fullmatch(name):
        raise AccountError("name must be 1-64 letters, digits, '.', '_' or '-'")
    try:
        url = validate_base_url(base_url)
    except (ValueError, ia.InsecureTransportError) as exc:
        raise AccountError(f"account {name!r}: {exc}") from None
    if ca_file is not None:
        problem = _ca_problem(ca_file)
        if problem is not None:
            raise AccountError(f"account {name!r}: {problem}")
    if format not in ("xml", "json"):
        raise AccountError(f"account {name!r}: format must be 'xml' or 'json'")
    username, oauth1, token = credentials.username, credentials.oauth1, credentials.token
    if not username:
        raise AccountError(f"account {name!r}: a username (or OAuth 1 consumer key) is needed")
    if not all(text.isprintable() for text in (username, token or "")):
        raise AccountError(
            f"account {name!r}: the username and token must not hold control characters"
        )
    if oauth1 and not (token and credentials.token_secret):
        raise AccountError(f"account {name!r}: OAuth 1 needs --token and --token-secret")
    if hourly_limit < 1 or every_seconds < 1:
        raise AccountError(f"account {name!r}: the limit and the interval must be positive")
    return Account(
        name=name,
        base_url=base_url,
        host=account_host(url),
        format="json" if format == "json" else "xml",
        auth="oauth1" if oauth1 else "basic",
        username=username,
        secret_ref=_reference(credentials.secret, "secret"),
        token=token if oauth1 else None,
        token_secret_ref=_reference(credentials.token_secret, "token secret")
        if oauth1 and credentials.token_secret
        else None,
        ca_file=ca_file,
        hourly_limit=hourly_limit,
        every_seconds=every_seconds,
    )


@functools.lru_cache(maxsize=64)
def _ca_problem(path: str) -> str | None:
    """Why the CA file cannot be used, or None (once per file: an import names one file
    for thousands of accounts)."""
    try:
        load_ca(path)
    except ia.ConfigurationError as exc:
        return str(exc)
    return None


def _reference(text: str, what: str) -> str:
    try:
        return str(parse_secret_ref(text, what))
    except SecretError as exc:
        raise AccountError(str(exc)) from None


def _row(account: Account) -> tuple[Any, ...]:
    """The columns an account is written with: all but its schedule and creation time."""
    return attrs.astuple(account)[:-2]


async def add_account(conn: Conn, account: Account) -> bool:
    """Insert the account, due now; False when the name is taken (nothing changed)."""
    cursor = await conn.execute(SQL["add_account"], _row(account))
    return await cursor.fetchone() is not None


async def upsert_accounts(conn: Conn, accounts: Sequence[Account]) -> tuple[int, int, int]:
    """Add the new accounts (due now) and update the changed ones, in one statement;
    (added, updated, unchanged). Importing the same rows again writes nothing."""
    if not accounts:
        return 0, 0, 0
    columns = zip(*(_row(a) for a in accounts), strict=True)
    cursor = await conn.execute(SQL["upsert_accounts"], [list(c) for c in columns])
    inserted = [bool(row[0]) for row in await cursor.fetchall()]
    added = sum(inserted)
    updated = len(inserted) - added
    return added, updated, len(accounts) - added - updated


async def list_accounts(conn: Conn) -> list[Account]:
    """Every account, by name."""
    cursor = await conn.execute(SQL["list_accounts"])
    return [Account(*row) for row in await cursor.fetchall()]


async def remove_account(conn: Conn, name: str, *, purge: bool = False) -> bool:
    """Delete the account (its runs too; with `purge`, its stored invoices) in one statement;
    False if absent."""
    cursor = await conn.execute(SQL["remove_account"], {"name": name, "purge": purge})
    return await cursor.fetchone() is not None
