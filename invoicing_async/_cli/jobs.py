"""`db migrate`, `accounts`, `worker`, `enqueue` and `status`: many accounts on PostgreSQL.

Every command reads ``--database-url`` or ``$INVOICING_DATABASE_URL``. Exit codes are those
of `sync`: 0 done, 1 an error, 2 a usage error, 3 "later" (nothing failed, but not done).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from invoicing_async._jobs.tasks import Jobs

__all__ = ["ENV_DATABASE_URL", "add_job_commands", "run_job_command"]

ENV_DATABASE_URL = "INVOICING_DATABASE_URL"


def _database_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        default=os.environ.get(ENV_DATABASE_URL),
        metavar="URL",
        help=f"postgresql://… (default: ${ENV_DATABASE_URL})",
    )


def add_job_commands(commands: Any) -> None:
    """Add the PostgreSQL commands to the `invoicing-async` parser's subparsers."""
    db = commands.add_parser("db", help="the PostgreSQL database of accounts, jobs and stores")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    _database_argument(db_commands.add_parser("migrate", help="create or upgrade the tables"))

    accounts = commands.add_parser("accounts", help="the accounts workers sync")
    account_commands = accounts.add_subparsers(dest="accounts_command", required=True)
    add = account_commands.add_parser("add", help="add an account (due at once)")
    add.add_argument("name")
    add.add_argument("--base-url", required=True)
    add.add_argument("--username", required=True, help="or the OAuth 1 consumer key")
    add.add_argument(
        "--secret",
        required=True,
        metavar="REF",
        help="where the password (OAuth 1: consumer secret) lives: env:VARIABLE or "
        "file:/path (owner-only); never the secret itself",
    )
    add.add_argument("--format", choices=("xml", "json"), default="xml")
    add.add_argument("--oauth1", action="store_true", help="OAuth 1 instead of Basic")
    add.add_argument("--token", help="OAuth 1 token")
    add.add_argument("--token-secret", metavar="REF", help="OAuth 1: env:VARIABLE or file:/path")
    add.add_argument("--ca-file", help="extra CA certificate to trust (PEM), on the workers")
    add.add_argument("--limit", type=int, default=350, help="requests per hour (default 350)")
    add.add_argument(
        "--every", type=int, default=86400, metavar="SECONDS", help="sync interval (1 day)"
    )
    _database_argument(add)
    listing = account_commands.add_parser("list", help="list the accounts (no secrets)")
    listing.add_argument("--json", action="store_true")
    _database_argument(listing)
    remove = account_commands.add_parser("remove", help="remove an account and its runs")
    remove.add_argument("name")
    remove.add_argument("--purge", action="store_true", help="delete its stored invoices too")
    _database_argument(remove)

    worker = commands.add_parser("worker", help="run a worker: sync queued accounts")
    worker.add_argument("--concurrency", type=int, default=4, help="accounts synced at once")
    worker.add_argument("--until-idle", action="store_true", help="stop when no job is left")
    worker.add_argument("--heartbeat", type=float, default=10.0, metavar="SECONDS")
    worker.add_argument(
        "--stalled-after",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a worker silent this long is lost: its accounts are queued again",
    )
    _database_argument(worker)

    enqueue = commands.add_parser("enqueue", help="queue accounts to sync now")
    enqueue.add_argument("accounts", nargs="*", metavar="ACCOUNT")
    enqueue.add_argument("--all", action="store_true", help="every account")
    _database_argument(enqueue)

    status = commands.add_parser("status", help="each account's last run and next due time")
    status.add_argument("--json", action="store_true")
    _database_argument(status)


def _error(text: str) -> None:
    print(f"error: {text}", file=sys.stderr)


async def run_job_command(args: argparse.Namespace) -> int:
    """Run a PostgreSQL command; its exit code. Database errors are exit 1, never a trace."""
    from invoicing_async._postgres.connect import where_of
    from invoicing_async.errors import InvoicingError

    url = args.database_url
    if getattr(args, "concurrency", 1) < 1 or getattr(args, "stalled_after", 1.0) <= 0:
        _error("--concurrency must be at least 1 and --stalled-after positive")
        return 2
    if not url:
        _error(f"--database-url (or ${ENV_DATABASE_URL}) is required")
        return 2
    try:
        import psycopg
        from psycopg_pool import PoolTimeout

        from invoicing_async._jobs.tasks import Jobs

        # A running account holds a connection (its lock) and borrows others to write.
        concurrency = getattr(args, "concurrency", 1)
        async with Jobs(
            url,
            stalled_after=getattr(args, "stalled_after", 30.0),
            pool_size=max(10, 2 * concurrency + 4),
        ) as jobs:
            return await _dispatch(args, jobs)
    except ImportError:
        _error("these commands need the [postgres] extra: pip install 'invoicing-async[postgres]'")
        return 1
    except InvoicingError as exc:
        _error(str(exc))
        return 1
    except (psycopg.Error, PoolTimeout) as exc:
        _error(f"{where_of(url)}: {type(exc).__name__}: {str(exc).strip()}")
        return 1


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
        return 0
    if args.command == "enqueue":
        return await _enqueue(args, jobs)
    return await _status(args, jobs)


async def _accounts(args: argparse.Namespace, jobs: Jobs) -> int:
    from invoicing_async._jobs import accounts as a

    async with jobs.pool.connection() as conn:
        if args.accounts_command == "add":
            try:
                account = a.new_account(
                    args.name,
                    base_url=args.base_url,
                    username=args.username,
                    secret=args.secret,
                    format=args.format,
                    oauth1=args.oauth1,
                    token=args.token,
                    token_secret=args.token_secret,
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
        print(json.dumps([x.to_dict() for x in accounts], indent=2))
    else:
        for x in accounts:
            due = x.due_at.isoformat(timespec="seconds") if x.due_at else "queued"
            print(f"{x.name}\t{x.base_url}\t{x.format}\t{x.auth}\t{x.username}\tdue {due}")
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
    for name, state in (await jobs.enqueue(names)).items():
        print(f"{name}: {'queued' if state == 'queued' else 'already waiting'}")
    return 0


async def _status(args: argparse.Namespace, jobs: Jobs) -> int:
    from invoicing_async._jobs.status import account_statuses

    async with jobs.pool.connection() as conn:
        rows = await account_statuses(conn)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
        return 0
    for r in rows:
        due = r.due_at.isoformat(timespec="seconds") if r.due_at else "queued or running"
        last = "never run" if r.run_status is None else f"{r.run_status}, {r.requests} requests"
        if r.run_status == "running":
            last += f", {r.done}/{r.total}"
        if r.error:
            last += f" ({r.error})"
        print(f"{r.account}: {last}; due {due}")
    return 0
