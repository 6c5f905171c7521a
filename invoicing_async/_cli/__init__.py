"""The `invoicing-async` command: `demo`, `sync`, `sync-many`, `fake-server`, and the
PostgreSQL commands of `_cli.jobs` (`db migrate`, `accounts`, `worker`, `enqueue`, `status`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from invoicing_async._cli.options import CommandParser, add_command, positive_int
from invoicing_async._logs import printable, report_error
from invoicing_async._version import __version__

if TYPE_CHECKING:
    from invoicing_async._sync.report import SyncReport
    from invoicing_async._sync.store import Store

__all__ = ["main"]

ENV_USERNAME = "INVOICING_USERNAME"
ENV_PASSWORD = "INVOICING_PASSWORD"
ENV_BASE_URL = "INVOICING_BASE_URL"


def _parser() -> CommandParser:
    parser = CommandParser(
        prog="invoicing-async",
        description="Asyncio client and sync engine for the Invoicing Service API v1.0.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = add_command(
        commands, "demo", help="sync a generated account from the built-in fake service, twice"
    )
    demo.add_argument("--invoices", type=positive_int, default=3000, help="invoices to generate")
    demo.add_argument("--db", type=Path, help="SQLite file (default: a temporary one)")
    demo.add_argument(
        "--format", choices=("xml", "json"), default="xml", help="wire format (default: xml)"
    )
    demo.add_argument(
        "--seed", type=int, default=2014, help="seed of the generated invoices and changes"
    )
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")

    sync = add_command(commands, "sync", help="mirror an account's invoices into a SQLite file")
    sync.add_argument(
        "--base-url", default=os.environ.get(ENV_BASE_URL), help=f"or ${ENV_BASE_URL}"
    )
    sync.add_argument("--db", type=Path, required=True, help="SQLite file to create or update")
    sync.add_argument(
        "--username",
        default=os.environ.get(ENV_USERNAME),
        help=f"or ${ENV_USERNAME}; without one, OAuth 1 credentials are read from "
        "$INVOICING_CONSUMER_KEY, $INVOICING_CONSUMER_SECRET, $INVOICING_TOKEN and "
        "$INVOICING_TOKEN_SECRET",
    )
    sync.add_argument(
        "--password-env",
        default=ENV_PASSWORD,
        help=f"environment variable holding the password (default ${ENV_PASSWORD}); "
        "never given on the command line, where other users could read it",
    )
    sync.add_argument(
        "--format", choices=("xml", "json"), default="xml", help="wire format (default: xml)"
    )
    sync.add_argument("--ca-file", type=Path, help="extra CA certificate to trust (PEM)")
    sync.add_argument(
        "--dry-run", action="store_true", help="list and plan; fetch nothing, write nothing"
    )
    sync.add_argument("--json", action="store_true", help="print the report as JSON")
    sync.add_argument("--wait-for-budget", action="store_true", help="wait for the hourly budget")
    sync.add_argument("--force-deletions", action="store_true", help="apply mass deletions")
    sync.add_argument(
        "--concurrency", type=positive_int, default=4, help="fetch requests in flight at once"
    )
    sync.add_argument("--no-progress", action="store_true", help="no progress bar")
    _budget_arguments(sync)

    many = add_command(
        commands, "sync-many", help="sync every account of a TOML accounts file into SQLite files"
    )
    many.add_argument("accounts_file", type=Path, help="TOML: [[accounts]] tables")
    many.add_argument("--concurrency", type=positive_int, default=8, help="accounts synced at once")
    many.add_argument("--wait-for-budget", action="store_true", help="wait for the hourly budget")
    many.add_argument("--json", action="store_true", help="print the summary as JSON")
    _budget_arguments(many)

    from invoicing_async._cli.jobs import add_job_commands

    add_job_commands(commands)

    fake = add_command(commands, "fake-server", help="run the fake service until interrupted")
    fake.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
    )
    fake.add_argument("--port", type=int, default=8443, help="port to listen on (default: 8443)")
    fake.add_argument(
        "--invoices", type=int, default=1000, help="invoices generated per account (default: 1000)"
    )
    fake.add_argument(
        "--seed", type=int, default=0, help="seed of the generated invoices (same seed, same data)"
    )
    fake.add_argument(
        "--username", default="api-user", help="Basic user of the first account (default: api-user)"
    )
    fake.add_argument("--password", default=None, help="default: a random one, printed")
    fake.add_argument("--no-tls", action="store_true", help="serve plain http (loopback only)")
    fake.add_argument("--limit", type=int, default=350, help="requests per hour per account")
    fake.add_argument("--ca-out", type=Path, help="write the CA certificate (PEM) here")
    fake.add_argument("--latency", type=float, default=0.0, help="seconds added to each response")
    fake.add_argument(
        "--accounts",
        type=int,
        default=1,
        help="serve N accounts (the first is --username, then account-2 … account-N), "
        "each with its own budget and its own copy of the same invoices, the same password",
    )
    fake.add_argument(
        "--oauth1",
        action="store_true",
        help="also accept OAuth 1.0a (HMAC-SHA1); prints a consumer key and secret and "
        "each account's token and secret",
    )
    fake.add_argument(
        "--port-per-account",
        action="store_true",
        help="each account on a port of its own (as each customer has a host of its own); "
        "prints each account's base URL",
    )
    fake.add_argument(
        "--spec-shape",
        action="store_true",
        help="send only the specification's fields (by default invoices carry the fields "
        "the real service sent beyond it: tax_components, sent_at, tax on lines…)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; its exit code (docs/operations/exit-codes.md). An expected failure
    (a file, TLS, a closed pipe, permissions, the database) is one line on stderr."""
    from invoicing_async._cli.options import configure_logging

    args = _parser().parse_args(argv)
    configure_logging(args, default=logging.INFO if args.command == "worker" else None)
    try:
        code = _command(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `status | head`: the reader has what it wanted. Later writes go nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        text = _expected_failure(exc, args)
        if text is None:
            raise
        report_error(text)
        return 1


#: What a shell reports for a process killed by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141


def _command(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from invoicing_async._cli.demo import run_demo

        return asyncio.run(
            run_demo(
                invoices=args.invoices,
                db=args.db,
                fmt=args.format,
                seed=args.seed,
                progress=not args.no_progress,
            )
        )
    if args.command == "sync":
        return asyncio.run(_sync(args))
    if args.command == "sync-many":
        return asyncio.run(_sync_many(args))
    if "database_url" in args:  # every PostgreSQL command has --database-url
        from invoicing_async._cli.jobs import run_job_command

        return asyncio.run(run_job_command(args))
    return asyncio.run(_fake_server(args))


def _expected_failure(exc: Exception, args: argparse.Namespace) -> str | None:
    """One line naming what is at fault, or None for a failure nobody expected (a bug:
    its traceback is shown)."""
    from invoicing_async._account_run import describe_failure
    from invoicing_async._secrets import redact

    if type(exc).__module__.startswith(("psycopg", "psycopg_pool")):
        from invoicing_async._postgres.reasons import describe, where_of

        where = where_of(getattr(args, "database_url", None) or "")
        return redact(f"{where}: {describe(exc)}")
    return describe_failure(exc)


def _budget_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--budget",
        metavar="URL",
        default=os.environ.get("INVOICING_BUDGET_URL"),
        help="share the hourly budget with other processes: sqlite:///path, postgresql://… "
        "or redis://… (default: $INVOICING_BUDGET_URL; none: this process only)",
    )
    parser.add_argument(
        "--reserve",
        type=int,
        default=0,
        metavar="N",
        help="requests per hour the sync leaves to interactive users of a shared budget",
    )


async def _sync(args: argparse.Namespace) -> int:
    import invoicing_async as ia
    from invoicing_async._account_run import AccountRun, Credentials
    from invoicing_async._cli.sync_many import StoreLock
    from invoicing_async._secrets import SecretPolicy
    from invoicing_async._transport.environment import auth_from_env

    if not args.base_url:
        print(f"error: --base-url (or ${ENV_BASE_URL}) is required", file=sys.stderr)
        return 2
    auth: ia.Auth | Credentials
    if args.username:
        if os.environ.get(args.password_env) is None:
            print(f"error: set the password in ${args.password_env}", file=sys.stderr)
            return 2
        auth = Credentials(args.username, f"env:{args.password_env}")
    else:
        try:  # OAuth 1 (or Basic) from the INVOICING_* variables
            auth = auth_from_env()
        except ia.ConfigurationError as exc:
            print(f"error: no username given and {printable(str(exc))}", file=sys.stderr)
            return 2
    db: Path = args.db
    # A dry run writes nothing: no lock file, and no database file where there is none.
    lock = None if args.dry_run else StoreLock(db)
    run = AccountRun(
        account=str(db),
        base_url=args.base_url,
        auth=auth,
        open_store=_store_opener(db, dry_run=args.dry_run),
        new_budget=lambda: ia.RateBudget(shared=args.budget, reserve=args.reserve),
        format=args.format,
        ca_file=args.ca_file,
        lock=None if lock is None else lock.held,
        secret_policy=SecretPolicy.unconfined(),
        concurrency=args.concurrency,
        dry_run=args.dry_run,
        wait_for_budget=args.wait_for_budget,
        force_deletions=args.force_deletions,
        progress=not (args.no_progress or args.json),
    )
    outcome = await run.run()
    if outcome.report is None:
        if outcome.status == "locked":
            print(f"another sync holds {lock.path if lock else db}: not started", file=sys.stderr)
        elif outcome.status == "budget":
            when = f" (~{outcome.eta:.0f}s)" if outcome.eta is not None else ""
            print(
                f"stopped for the hourly budget{when}: {printable(str(outcome.error))}",
                file=sys.stderr,
            )
        else:
            print(f"error: {printable(str(outcome.error))}", file=sys.stderr)
        return outcome.exit_code
    if args.json:
        print(json.dumps(outcome.report.to_dict(), default=str, indent=2))
    else:
        print(_report_line(outcome.report))
    return outcome.exit_code


def _store_opener(db: Path, *, dry_run: bool) -> Callable[[], AbstractAsyncContextManager[Store]]:
    """The SQLite store; for a dry run where there is none yet, an empty one in memory
    (a dry run creates no file)."""
    from invoicing_async._sync.memory import MemoryStore
    from invoicing_async._sync.sqlite import SQLiteStore

    if dry_run and not db.exists():
        return MemoryStore
    return lambda: SQLiteStore(db)


async def _sync_many(args: argparse.Namespace) -> int:
    from invoicing_async._account_run import RunOutcome, exit_code
    from invoicing_async._cli.accounts_file import AccountsFileError, load_accounts
    from invoicing_async._cli.sync_many import summary, sync_many

    try:
        accounts = load_accounts(args.accounts_file)
    except AccountsFileError as exc:
        print("error: " + "\n".join(map(printable, exc.problems)), file=sys.stderr)
        return 2

    def progress(outcome: RunOutcome) -> None:
        if not args.json:
            line = _report_line(outcome.report) if outcome.report else outcome.error
            print(f"{outcome.account}: {outcome.status}: {printable(str(line))}", flush=True)

    outcomes = await sync_many(
        accounts,
        concurrency=args.concurrency,
        wait_for_budget=args.wait_for_budget,
        on_done=progress,
        budget_url=args.budget,
        reserve=args.reserve,
    )
    result = summary(outcomes)
    if args.json:
        print(json.dumps(result, default=str, indent=2))
    else:
        counts = ", ".join(f"{n} {status}" for status, n in result["counts"].items() if n)
        print(f"{len(outcomes)} accounts: {counts}; {result['requests']} requests")
    return exit_code(outcomes)


def _report_line(report: SyncReport) -> str:
    if report.dry_run:
        text = (
            f"dry run: listed {report.listed}: would fetch {report.planned} in "
            f"{report.needed_requests} requests ({report.budget_available} available now), "
            f"delete {report.deleted}, {report.unchanged} unchanged; "
            f"{report.requests} requests spent"
        )
    else:
        text = (
            f"listed {report.listed}: {report.created} new, {report.updated} updated, "
            f"{report.deleted} deleted, {report.unchanged} unchanged; "
            f"{report.requests} requests"
        )
    if report.stopped_for_budget:
        text += f"; stopped for the hourly budget, {len(report.pending)} left (~{report.eta:.0f}s)"
    if report.deletions_refused:
        text += f"; deletions refused: {report.deletions_refused}"
    if report.quarantined:
        text += f"; quarantined: {len(report.quarantined)}"
    return text


async def _fake_server(args: argparse.Namespace) -> int:
    from invoicing_async.testing import FakeInvoicingService, populate

    service = FakeInvoicingService(
        host=args.host,
        port=args.port,
        tls=not args.no_tls,
        username=args.username,
        password=args.password,
        invoices=args.invoices,
        seed=args.seed,
        limit=args.limit,
        port_per_account=args.port_per_account,
        oauth1=args.oauth1,
        real_shape=not args.spec_shape,
    )
    service.account.faults.latency = args.latency
    for n in range(2, args.accounts + 1):
        extra = service.add_account(f"account-{n}", password=service.password)
        # Its own invoices (the same values, other objects): a change in one account
        # must never show in another.
        populate(extra, args.invoices, seed=args.seed)
        extra.faults.latency = args.latency
    async with service:
        ca_path = args.ca_out
        if service.tls:
            if ca_path is None:
                ca_path = Path(tempfile.gettempdir()) / "invoicing-async-fake-ca.pem"
            service.write_ca(ca_path)
        print(f"Fake Invoicing Service with {args.invoices} invoices")
        print(f"  base URL:  {service.base_url}")
        if service.http_url:
            print(f"  http URL:  {service.http_url} (redirects to https)")
        print(f"  username:  {service.username}")
        if args.accounts > 1:
            print(f"  accounts:  {args.accounts} (account-2 … account-{args.accounts})")
        if args.port_per_account:
            for account in service.accounts.values():
                print(f"  {account.username}: {service.base_url_for(account)}")
        print(f"  password:  {service.password}")
        if service.oauth1 is not None:  # one consumer, a token for each account
            consumer = service.oauth1_auth
            print(
                "  OAuth 1.0a consumer key / secret: "
                f"{consumer.consumer_key} / {consumer.consumer_secret}"
            )
            for account in service.accounts.values():
                auth = service.oauth1_auth_for(account)
                who = "" if len(service.accounts) == 1 else f" ({account.username})"
                print(f"  OAuth 1.0a token / secret{who}: {auth.token} / {auth.token_secret}")
        if ca_path is not None:
            print(f"  CA (PEM):  {ca_path}")
            print("  client:    ssl=ssl.create_default_context(cafile=<CA>)")
        print("Press Ctrl-C to stop.", flush=True)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
