"""`db migrate`, `accounts`, `worker`, `enqueue` and `status`: many accounts on PostgreSQL
(``--database-url`` or ``$INVOICING_DATABASE_URL``; exit codes as `sync`'s)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._cli.options import add_command, positive_int
from invoicing_async._extras import install_hint
from invoicing_async._logs import printable, report_error
from invoicing_async._secrets import DEFAULT_ENV_PREFIX
from invoicing_async._text import package_logger

if TYPE_CHECKING:
    from invoicing_async._jobs.status import AccountStatus
    from invoicing_async._jobs.tasks import Jobs

__all__ = ["ENV_DATABASE_URL", "add_job_commands", "run_job_command"]

logger = package_logger("invoicing_async.jobs")

ENV_DATABASE_URL = "INVOICING_DATABASE_URL"
ENV_SECRETS_DIR = "INVOICING_SECRETS_DIR"
ENV_SECRET_ENV_PREFIX = "INVOICING_SECRET_ENV_PREFIX"


def add_job_commands(commands: Any) -> None:
    """Add the PostgreSQL commands to the `invoicing-async` parser's subparsers."""
    db = commands.add_parser("db", help="the PostgreSQL database of accounts, jobs and stores")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    migrate = add_command(db_commands, "migrate", help="create or upgrade the tables")

    accounts = commands.add_parser("accounts", help="the accounts workers sync")
    account_commands = accounts.add_subparsers(dest="accounts_command", required=True)
    add = add_command(account_commands, "add", help="add an account (due at once)")
    add.add_argument("name", help="the account's name, unique in the database")
    add.add_argument("--base-url", required=True, help="the account's own https address")
    add.add_argument("--username", required=True, help="or the OAuth 1 consumer key")
    add.add_argument(
        "--secret",
        required=True,
        metavar="REF",
        help="where the password (OAuth 1: consumer secret) lives: env:VARIABLE or "
        "file:/path (owner-only); never the secret itself. Workers read only variables "
        "under their --secret-env-prefix and files under their --secrets-dir",
    )
    add.add_argument(
        "--format", choices=("xml", "json"), default="xml", help="wire format (default: xml)"
    )
    add.add_argument("--oauth1", action="store_true", help="OAuth 1 instead of Basic")
    add.add_argument("--token", help="OAuth 1 token")
    add.add_argument("--token-secret", metavar="REF", help="OAuth 1: env:VARIABLE or file:/path")
    add.add_argument("--ca-file", help="extra CA certificate to trust (PEM), on the workers")
    add.add_argument(
        "--limit", type=positive_int, default=350, help="requests per hour (default 350)"
    )
    add.add_argument(
        "--every", type=positive_int, default=86400, metavar="SECONDS", help="sync interval (1 day)"
    )
    bulk = add_command(
        account_commands,
        "import",
        help="add or update many accounts from a TOML (as sync-many's) or CSV file; "
        "every row is checked first: one bad row and nothing is written",
    )
    bulk.add_argument(
        "file", type=Path, metavar="FILE", help="a TOML accounts file, or CSV with a header row"
    )
    listing = add_command(account_commands, "list", help="list the accounts (no secrets)")
    listing.add_argument("--json", action="store_true", help="print the accounts as JSON")
    remove = add_command(account_commands, "remove", help="remove an account and its runs")
    remove.add_argument("name", help="the account to remove")
    remove.add_argument("--purge", action="store_true", help="delete its stored invoices too")

    worker = add_command(commands, "worker", help="run a worker: sync queued accounts")
    worker.add_argument(
        "--concurrency", type=positive_int, default=4, help="accounts synced at once"
    )
    worker.add_argument(
        "--until-idle",
        action="store_true",
        help="stop when no job is left; exit 1 if any run ended in error",
    )
    worker.add_argument(
        "--heartbeat",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often the worker says it is alive (default: 10)",
    )
    worker.add_argument(
        "--stalled-after",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a worker silent this long is lost: its accounts are queued again",
    )
    worker.add_argument(
        "--retry-cap",
        type=float,
        default=6 * 3600.0,
        metavar="SECONDS",
        help="a failing account is retried after 15 minutes, then twice as long after each "
        "failure in a row, up to this (6 hours)",
    )
    worker.add_argument(
        "--secrets-dir",
        type=Path,
        default=os.environ.get(ENV_SECRETS_DIR),
        metavar="DIR",
        help="file: secrets must lie under this folder (symlinks resolved), which only "
        "this user (or root) may write; without it, no file: secret is read "
        f"(default: ${ENV_SECRETS_DIR})",
    )
    worker.add_argument(
        "--secret-env-prefix",
        default=os.environ.get(ENV_SECRET_ENV_PREFIX, DEFAULT_ENV_PREFIX),
        metavar="PREFIX",
        help=f"env: secrets must be variables named PREFIX* (default: ${ENV_SECRET_ENV_PREFIX} "
        f"or {DEFAULT_ENV_PREFIX})",
    )
    worker.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on /metrics and health on /healthz at this port "
        "(needs the [metrics] extra)",
    )
    worker.add_argument(
        "--metrics-per-host",
        action="store_true",
        help="also a gauge of the budget left per customer host (one series per host: "
        "for fleets of few hosts)",
    )
    worker.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address the metrics port listens on (default 127.0.0.1)",
    )

    enqueue = add_command(commands, "enqueue", help="queue accounts to sync now")
    enqueue.add_argument("accounts", nargs="*", metavar="ACCOUNT", help="accounts to sync now")
    enqueue.add_argument("--all", action="store_true", help="every account")

    status = add_command(commands, "status", help="each account's last run and next due time")
    status.add_argument("account", nargs="?", metavar="ACCOUNT", help="this account only")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.add_argument(
        "--check",
        action="store_true",
        help="print only the problems (an account whose last run failed or that is "
        "overdue) and exit 1, or one summary line and exit 0 (for monitoring)",
    )
    status.add_argument(
        "--overdue-margin",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="with --check: how long past its due time an account may wait (1 hour)",
    )
    for leaf in (migrate, add, bulk, listing, remove, worker, enqueue, status):
        leaf.add_argument(
            "--database-url",
            default=os.environ.get(ENV_DATABASE_URL),
            metavar="URL",
            help=f"postgresql://… (default: ${ENV_DATABASE_URL})",
        )


def _error(text: str) -> None:
    report_error(text)


async def run_job_command(args: argparse.Namespace) -> int:
    """Run a PostgreSQL command; its exit code. Database errors reach `main`'s handler."""
    from invoicing_async._secrets import SecretPolicy

    url = args.database_url
    if getattr(args, "stalled_after", 1.0) <= 0 or getattr(args, "retry_cap", 1.0) <= 0:
        _error("--stalled-after and --retry-cap must be positive")
        return 2
    if not url:
        _error(f"--database-url (or ${ENV_DATABASE_URL}) is required")
        return 2
    try:
        from invoicing_async._jobs.tasks import Jobs
    except ImportError:
        _error(f"these commands need procrastinate and psycopg; {install_hint('postgres')}")
        return 1
    # A running account holds a connection (its lock) and borrows others to write.
    concurrency = getattr(args, "concurrency", 1)
    policy = SecretPolicy(
        env_prefix=getattr(args, "secret_env_prefix", DEFAULT_ENV_PREFIX),
        secrets_dir=getattr(args, "secrets_dir", None),
    )
    metrics = None
    if getattr(args, "metrics_port", None) is not None:
        from invoicing_async._jobs.metrics import MetricsServer, RunMetrics

        metrics = RunMetrics(per_host=args.metrics_per_host)
    async with Jobs(
        url,
        stalled_after=getattr(args, "stalled_after", 30.0),
        retry_cap=getattr(args, "retry_cap", 6 * 3600.0),
        pool_size=max(10, 2 * concurrency + 4),
        secret_policy=policy,
        observers=() if metrics is None else (metrics,),
    ) as jobs:
        if metrics is None:
            return await _dispatch(args, jobs)
        async with MetricsServer(
            jobs, metrics, host=args.metrics_host, port=args.metrics_port
        ) as server:
            logger.info(
                "metrics on http://%s:%d/metrics, health on /healthz",
                args.metrics_host,
                server.port,
                extra={"event": "metrics_listening", "port": server.port},
            )
            return await _dispatch(args, jobs)


async def _dispatch(args: argparse.Namespace, jobs: Jobs) -> int:
    if args.command == "db":
        applied = await jobs.migrate()
        print(f"migrated: {applied}" if applied else "the schema is up to date")
        return 0
    if args.command == "accounts":
        return await _accounts(args, jobs)
    if args.command == "worker":
        await jobs.run_worker(
            concurrency=args.concurrency, wait=not args.until_idle, heartbeat=args.heartbeat
        )
        return 1 if args.until_idle and jobs.failed_runs else 0
    if args.command == "enqueue":
        return await _enqueue(args, jobs)
    return await _status(args, jobs)


async def _accounts(args: argparse.Namespace, jobs: Jobs) -> int:
    from invoicing_async._account_run import Credentials
    from invoicing_async._jobs import accounts as a

    if args.accounts_command == "import":
        return await _import(args.file, jobs)
    async with jobs.pool.connection() as conn:
        if args.accounts_command == "add":
            try:
                account = a.new_account(
                    args.name,
                    base_url=args.base_url,
                    credentials=Credentials(
                        args.username,
                        args.secret,
                        oauth1=args.oauth1,
                        token=args.token,
                        token_secret=args.token_secret,
                    ),
                    format=args.format,
                    ca_file=args.ca_file,
                    hourly_limit=args.limit,
                    every_seconds=args.every,
                )
            except a.AccountError as exc:
                _error(str(exc))
                return 2
            if not await a.add_account(conn, account):
                _error(f"account {args.name!r} exists (remove it first)")
                return 1
            print(f"added {args.name}")
            return 0
        if args.accounts_command == "remove":
            if not await a.remove_account(conn, args.name, purge=args.purge):
                _error(f"no account {args.name!r}")
                return 1
            print(f"removed {args.name}")
            return 0
        accounts = await a.list_accounts(conn)
    if args.json:
        print(
            json.dumps([attrs.asdict(x) for x in accounts], indent=2, default=dt.datetime.isoformat)
        )
    else:
        for x in accounts:
            due = x.due_at.isoformat(timespec="seconds") if x.due_at else "queued"
            fields = (x.name, x.base_url, x.format, x.auth, x.username, f"due {due}")
            print("\t".join(map(printable, fields)))  # a tab or an escape in a field: escaped
    return 0


async def _import(path: Path, jobs: Jobs) -> int:
    """`accounts import FILE`: every row checked, then all written in one transaction."""
    from invoicing_async._cli.accounts_file import AccountConfig, AccountsFileError, load_accounts
    from invoicing_async._jobs import accounts as a

    rows: list[a.Account] = []

    def check(config: AccountConfig) -> None:
        try:
            account = a.new_account(
                config.name,
                base_url=config.base_url,
                credentials=config.credentials(),
                format=config.format,
                ca_file=None if config.ca_file is None else str(config.ca_file),
                hourly_limit=config.hourly_limit,
                every_seconds=config.every_seconds,
            )
        except a.AccountError as exc:
            raise AccountsFileError(str(exc)) from None
        rows.append(account)

    try:
        load_accounts(path, check)
    except AccountsFileError as exc:
        if not exc.in_rows:  # the file itself: unreadable, not a regular file, too large
            _error(str(exc))
            return 1
        _error(f"{path}: {len(exc.problems)} bad rows; nothing imported")
        for line in exc.problems:
            print(f"  {printable(line)}", file=sys.stderr)
        return 1
    async with jobs.pool.connection() as conn:
        added, updated, unchanged = await a.upsert_accounts(conn, rows)
    print(f"imported {len(rows)} accounts: {added} added, {updated} updated, {unchanged} unchanged")
    return 0


async def _enqueue(args: argparse.Namespace, jobs: Jobs) -> int:
    from invoicing_async._jobs.accounts import list_accounts

    if bool(args.accounts) == bool(args.all):
        _error("give account names or --all")
        return 2
    async with jobs.pool.connection() as conn:
        known = [x.name for x in await list_accounts(conn)]
    names = known if args.all else list(dict.fromkeys(args.accounts))
    unknown = sorted(set(names) - set(known))
    if unknown:
        _error(f"no such accounts: {', '.join(unknown)}")
        return 2
    states = await jobs.enqueue(names)
    if not args.all or args.verbose:
        for name, state in states.items():
            print(f"{name}: {'queued' if state == 'queued' else 'already waiting'}")
    if args.all:
        queued = sum(state == "queued" for state in states.values())
        waiting = len(states) - queued
        print(f"enqueued {len(states)} accounts: {queued} queued, {waiting} already waiting")
    return 0


async def _status(args: argparse.Namespace, jobs: Jobs) -> int:
    from invoicing_async._jobs.status import account_statuses, problems, summary

    async with jobs.pool.connection() as conn:
        rows = await account_statuses(conn, args.account)
    if args.account is not None and not rows:
        _error(f"no account {args.account!r}")
        return 2
    if args.json:
        print(json.dumps([attrs.asdict(r) for r in rows], indent=2, default=dt.datetime.isoformat))
    elif not args.check:
        for r in rows:
            print(printable(_status_line(r)))
            if args.account is not None:
                _status_details(r)
    if not args.check:
        return 0
    found = problems(rows, overdue_margin=args.overdue_margin)
    for line in found:
        print(f"check: {printable(line)}", file=sys.stderr)
    if found:
        print(f"check: {len(found)} of {len(rows)} accounts need attention", file=sys.stderr)
        return 1
    if not args.json:
        print(summary(rows))
    return 0


def _status_line(r: AccountStatus) -> str:
    due = r.due_at.isoformat(timespec="seconds") if r.due_at else "queued or running"
    last = "never run" if r.run_status is None else f"{r.run_status}, {r.requests} requests"
    if r.run_status == "running":
        last += f", {r.done}/{r.total}"
    if r.failures > 1:
        last += f", {r.failures} failures in a row"
    if r.error:
        last += f" ({r.error})"
    return f"{r.account}: {last}; due {due}"


def _status_details(r: AccountStatus) -> None:
    """`status ACCOUNT`: its last run in full, beside the line."""
    if r.run_status is None:
        return
    started = r.started_at.isoformat(timespec="seconds") if r.started_at else "?"
    finished = r.finished_at.isoformat(timespec="seconds") if r.finished_at else "not yet"
    print(printable(f"  host: {r.host}"))
    print(
        printable(f"  last run: started {started}, finished {finished}, worker {r.worker or '?'}")
    )
    print(
        f"  invoices: {r.created} created, {r.updated} updated, {r.deleted} deleted; "
        f"{r.done}/{r.total} done"
    )
