"""The accounts file of `sync-many` and `accounts import` (docs/operations/cli.md): one TOML
table or CSV row per account, secrets by reference only (``*_env``/``*_file``), every
mistake reported at once with its line."""

from __future__ import annotations

import csv
import io
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

import invoicing_async as ia
from invoicing_async._account_run import Credentials
from invoicing_async._secrets import SecretError, read_regular_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["AccountConfig", "AccountsFileError", "load_accounts"]

#: Far above 100,000 accounts (a CSV row is ~150 bytes); a file that never ends (a device,
#: a FIFO) is refused, not read until memory runs out.
MAX_FILE_BYTES = 64 * 1024 * 1024
#: hourly_limit, every_seconds: 1 to 2**31 - 1 (a PostgreSQL integer), in ASCII digits.
_WHOLE = re.compile(r"[0-9]{1,10}")
_MAX_WHOLE = 2**31 - 1
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_ACCOUNTS_HEADER = re.compile(r"^\s*\[\[\s*accounts\s*\]\]", re.MULTILINE)
_SECRET_VALUES = frozenset({"password", "consumer_secret", "token_secret"})
#: Every key an account may have: its settings, its credentials, and its secrets only by
#: reference (``password_env``, ``password_file``...).
_KNOWN = {
    *("name", "base_url", "format", "db", "db_dir", "ca_file", "hourly_limit", "every_seconds"),
    *("auth", "username", "consumer_key", "token"),
    *(f"{secret}_{how}" for secret in _SECRET_VALUES for how in ("env", "file")),
}


class AccountsFileError(ia.InvoicingError):
    """The accounts file cannot be used: `problems`, one line per mistake (with its line
    when known); `in_rows`: whether they are mistakes of rows, not of the whole file."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems: tuple[str, ...] = tuple(problems) or (message,)
        self.in_rows = bool(problems)


@attrs.frozen
class AccountConfig:
    """One account of the file, its secrets not yet read (see `auth()`)."""

    name: str
    base_url: str
    format: ia.Format
    db: Path
    ca_file: Path | None
    settings: Mapping[str, str] = attrs.field(repr=False)
    #: Where the account is in the file (its ``[[accounts]]`` header or CSV row); 0 unknown.
    line: int = 0
    hourly_limit: int = 350
    every_seconds: int = 86400

    def credentials(self) -> Credentials:
        """The account's credentials by reference: ``password_env = "X"`` is ``env:X``,
        ``password_file = "/p"`` is ``file:/p`` (read when its run starts)."""
        kind = self.settings.get("auth", "basic")
        if kind == "basic":
            return Credentials(self._require("username"), self._reference("password"))
        if kind == "oauth1":
            return Credentials(
                self._require("consumer_key"),
                self._reference("consumer_secret"),
                oauth1=True,
                token=self._require("token"),
                token_secret=self._reference("token_secret"),
            )
        raise AccountsFileError(f"account {self.name!r}: auth must be 'basic' or 'oauth1'")

    def _require(self, key: str) -> str:
        value = self.settings.get(key)
        if not value:
            raise AccountsFileError(f"account {self.name!r}: {key} is required")
        return value

    def _reference(self, key: str) -> str:
        env, file = self.settings.get(f"{key}_env"), self.settings.get(f"{key}_file")
        if env:
            return f"env:{env}"
        if file:
            return f"file:{Path(file).absolute()}"
        raise AccountsFileError(f"account {self.name!r}: give {key}_env or {key}_file")


def load_accounts(
    path: Path, check: Callable[[AccountConfig], object] | None = None
) -> list[AccountConfig]:
    """Read and check the whole file before anything runs; `check` tests each account (its
    `AccountsFileError` is one more mistake)."""
    rows = _read_rows(path)
    base = path.absolute().parent
    configs: list[AccountConfig] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for index, (line, raw) in enumerate(rows, 1):
        name = str(raw.get("name", ""))
        if name in seen:
            problems.append(
                f"{_where(path, line)}account names must be unique: {name!r} "
                f"is also on line {seen[name]}"
            )
            continue
        seen[name] = line
        try:
            config = _account(raw, index, base, line)
            config.credentials()  # a missing username or secret key fails now
            if check is not None:
                check(config)
        except AccountsFileError as exc:
            problems.append(f"{_where(path, line)}{exc}")
            continue
        configs.append(config)
    if problems:
        raise AccountsFileError("\n".join(problems), problems)
    return configs


def _where(path: Path, line: int) -> str:
    return f"{path}:{line}: " if line else f"{path}: "


def _read_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The file's accounts as (line, keys), defaults applied."""
    try:
        data = read_regular_file(str(path), "accounts file", MAX_FILE_BYTES)
        text = data.decode("utf-8-sig")  # Excel's "CSV UTF-8" starts with a byte-order mark
    except SecretError as exc:  # not a regular file (a FIFO, /dev/zero), too large
        raise AccountsFileError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise AccountsFileError(f"cannot read accounts file {path}: {exc}") from None
    if path.suffix.lower() == ".csv":
        return _csv_rows(path, text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AccountsFileError(f"cannot read accounts file {path}: {exc}") from exc
    defaults = data.get("defaults", {})
    accounts = data.get("accounts")
    if not isinstance(defaults, dict) or not isinstance(accounts, list) or not accounts:
        raise AccountsFileError(f"{path}: expected [[accounts]] tables (and optional [defaults])")
    # tomllib keeps no positions: the n-th ``[[accounts]]`` header is the n-th account's.
    headers = [text.count("\n", 0, m.start()) + 1 for m in _ACCOUNTS_HEADER.finditer(text)]
    lines = headers if len(headers) == len(accounts) else [0] * len(accounts)
    rows: list[tuple[int, dict[str, Any]]] = []
    for index, (line, raw) in enumerate(zip(lines, accounts, strict=True), 1):
        if not isinstance(raw, dict):
            raise AccountsFileError(f"{path}: account #{index} is not a table")
        rows.append((line, {**defaults, **raw}))
    return rows


def _csv_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows: list[tuple[int, dict[str, Any]]] = []
    try:
        for raw in reader:
            extra = raw.pop(None, None)
            row: dict[str, Any] = {k: v for k, v in raw.items() if k and v}
            if extra:
                row["(more cells than the header)"] = extra
            rows.append((reader.line_num, row))
    except csv.Error as exc:
        raise AccountsFileError(f"{path}:{reader.line_num}: {exc}") from exc
    if not rows:
        raise AccountsFileError(f"{path}: expected a header row and one row per account")
    return rows


def _account(raw: dict[str, Any], index: int, base: Path, line: int) -> AccountConfig:
    name = str(raw.get("name", ""))
    label = f"account {name!r}" if name else f"account #{index}"
    if not _NAME.fullmatch(name):
        raise AccountsFileError(f"{label}: name must be 1-64 letters, digits, '.', '_' or '-'")
    clear = sorted(_SECRET_VALUES & raw.keys())
    if clear:
        raise AccountsFileError(
            f"{label}: {clear[0]} written in the file; use {clear[0]}_env or {clear[0]}_file"
        )
    unknown = sorted(raw.keys() - _KNOWN)
    if unknown:
        raise AccountsFileError(f"{label}: unknown keys {unknown}")
    for key in sorted(raw):
        # A username with a terminal escape or a newline would redraw the screen or
        # forge a line wherever it is shown: refused where it is written.
        if isinstance(raw[key], str) and not raw[key].isprintable():
            raise AccountsFileError(
                f"{label}: {key} holds a control character (a newline, a tab, a terminal "
                "escape); write it without"
            )
    if not isinstance(raw.get("base_url"), str):
        raise AccountsFileError(f"{label}: base_url is required")
    fmt = raw.get("format", "xml")
    if fmt not in ("xml", "json"):
        raise AccountsFileError(f"{label}: format must be 'xml' or 'json'")
    for key in ("hourly_limit", "every_seconds"):
        # ASCII digits only: str.isdigit() passes "²", which int() then refuses.
        text = str(raw.get(key, 1))
        if not (_WHOLE.fullmatch(text) and 0 < int(text) <= _MAX_WHOLE):
            raise AccountsFileError(
                f"{label}: {key} must be a positive whole number (at most {_MAX_WHOLE})"
            )
    db_dir = base / str(raw.get("db_dir", "."))
    db = base / str(raw["db"]) if "db" in raw else db_dir / f"{name}.sqlite3"
    ca = base / str(raw["ca_file"]) if raw.get("ca_file") else None
    # Paths in the file are relative to the file, wherever the command runs.
    settings = {
        k: str(base / str(v)) if k.endswith("_file") else str(v)
        for k, v in raw.items()
        if k not in ("name", "db", "db_dir", "hourly_limit", "every_seconds")
    }
    return AccountConfig(
        name=name,
        base_url=raw["base_url"],
        format=fmt,
        db=db,
        ca_file=ca,
        settings=settings,
        line=line,
        hourly_limit=int(raw.get("hourly_limit", 350)),
        every_seconds=int(raw.get("every_seconds", 86400)),
    )
