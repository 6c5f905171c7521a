"""The `invoicing-async` command: `demo`, `sync`, `sync-many`, `fake-server`, and the
PostgreSQL commands of `_cli.jobs` (`db migrate`, `accounts`, `worker`, `enqueue`, `status`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invoicing_async._version import __version__

if TYPE_CHECKING:
    from invoicing_async.testing import FakeInvoicingService

__all__ = ["main"]

ENV_USERNAME = "INVOICING_USERNAME"
ENV_PASSWORD = "INVOICING_PASSWORD"
ENV_BASE_URL = "INVOICING_BASE_URL"
JOB_COMMANDS = frozenset({"db", "accounts", "worker", "enqueue", "status"})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="invoicing-async",
        description="Asyncio client and sync engine for the Invoicing Service API v1.0.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo", help="sync a generated account from the built-in fake service, twice"
    )
    demo.add_argument("--invoices", type=int, default=3000, help="invoices to generate")
    demo.add_argument("--db", type=Path, help="SQLite file (default: a temporary one)")
    demo.add_argument("--format", choices=("xml", "json"), default="xml")
    demo.add_argument("--seed", type=int, default=2014)
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")

    sync = commands.add_parser("sync", help="mirror an account's invoices into a SQLite file")
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
    sync.add_argument("--format", choices=("xml", "json"), default="xml")
    sync.add_argument("--ca-file", type=Path, help="extra CA certificate to trust (PEM)")
    sync.add_argument("--dry-run", action="store_true", help="list and plan; fetch nothing")
    sync.add_argument("--json", action="store_true", help="print the report as JSON")
    sync.add_argument("--wait-for-budget", action="store_true", help="wait for the hourly budget")
    sync.add_argument("--force-deletions", action="store_true", help="apply mass deletions")
    sync.add_argument("--concurrency", type=int, default=4)
    sync.add_argument("--no-progress", action="store_true")
    _budget_arguments(sync)

    many = commands.add_parser(
        "sync-many", help="sync every account of a TOML accounts file into SQLite files"
    )
    many.add_argument("accounts_file", type=Path, help="TOML: [[accounts]] tables")
    many.add_argument("--concurrency", type=int, default=8, help="accounts synced at once")
    many.add_argument("--wait-for-budget", action="store_true", help="wait for the hourly budget")
    many.add_argument("--json", action="store_true", help="print the summary as JSON")
    _budget_arguments(many)

    from invoicing_async._cli.jobs import add_job_commands

    add_job_commands(commands)

    fake = commands.add_parser("fake-server", help="run the fake service until interrupted")
    fake.add_argument("--host", default="127.0.0.1")
    fake.add_argument("--port", type=int, default=8443)
    fake.add_argument("--invoices", type=int, default=1000)
    fake.add_argument("--seed", type=int, default=0)
    fake.add_argument("--username", default="api-user")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
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
        if args.command in JOB_COMMANDS:
            from invoicing_async._cli.jobs import run_job_command

            return asyncio.run(run_job_command(args))
        return asyncio.run(_fake_server(args))
    except KeyboardInterrupt:
        return 130


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
    import ssl

    import invoicing_async as ia
    from invoicing_async._cli.progress import ProgressBar
    from invoicing_async._cli.sync_many import StoreLock
    from invoicing_async._sync.engine import SyncEngine
    from invoicing_async._sync.sqlite import SQLiteStore
    from invoicing_async._transport.environment import auth_from_env

    if not args.base_url:
        print(f"error: --base-url (or ${ENV_BASE_URL}) is required", file=sys.stderr)
        return 2
    auth: ia.Auth
    if args.username:
        password = os.environ.get(args.password_env)
        if password is None:
            print(f"error: set the password in ${args.password_env}", file=sys.stderr)
            return 2
        auth = ia.BasicAuth(args.username, password)
    else:
        try:  # OAuth 1 (or Basic) from the INVOICING_* variables
            auth = auth_from_env()
        except ia.ConfigurationError as exc:
            print(f"error: no username given and {exc}", file=sys.stderr)
            return 2
    context = None
    if args.ca_file:
        context = ssl.create_default_context(cafile=str(args.ca_file))
    lock = StoreLock(args.db)
    if not lock.acquire():
        print(f"another sync holds {lock.path}: not started", file=sys.stderr)
        return 3
    bar = None if args.no_progress or args.json else ProgressBar("sync")
    budget = None
    try:
        budget = ia.RateBudget(shared=args.budget, reserve=args.reserve)
        async with (
            ia.InvoicingClient(
                args.base_url,
                auth=auth,
                format=args.format,
                ssl=context,
                budget=budget,
            ) as client,
            SQLiteStore(args.db) as store,
        ):
            report = await SyncEngine(
                client,
                store,
                concurrency=args.concurrency,
                dry_run=args.dry_run,
                wait_for_budget=args.wait_for_budget,
                force_deletions=args.force_deletions,
                on_progress=bar.update if bar else None,
            ).run()
    except ia.RateLimitExceeded as exc:
        # A stop for the budget is "run again later", whichever request met it.
        when = f" (~{exc.retry_after:.0f}s)" if exc.retry_after is not None else ""
        print(f"stopped for the hourly budget{when}: {exc}", file=sys.stderr)
        return 3
    except (ia.InvoicingError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        lock.release()
        if bar is not None:
            bar.close()
        if budget is not None:
            await budget.close()
    if args.json:
        print(json.dumps(report.to_dict(), default=str, indent=2))
    else:
        print(_report_line(report))
    return 0 if report.complete or args.dry_run else 3


async def _sync_many(args: argparse.Namespace) -> int:
    from invoicing_async._cli.accounts_file import AccountsFileError, load_accounts
    from invoicing_async._cli.sync_many import AccountOutcome, exit_code, summary, sync_many

    try:
        accounts = load_accounts(args.accounts_file)
    except AccountsFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def progress(outcome: AccountOutcome) -> None:
        if not args.json:
            line = _report_line(outcome.report) if outcome.report else outcome.error
            print(f"{outcome.name}: {outcome.status}: {line}", flush=True)

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


def _report_line(report: Any) -> str:
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
        if service.oauth1 is not None:
            _print_oauth1(service)
        if ca_path is not None:
            print(f"  CA (PEM):  {ca_path}")
            print("  client:    ssl=ssl.create_default_context(cafile=<CA>)")
        print("Press Ctrl-C to stop.", flush=True)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
    return 0


def _print_oauth1(service: FakeInvoicingService) -> None:
    """The OAuth 1.0a credentials: one consumer, a token for each account."""
    first = service.oauth1_auth
    print(f"  OAuth 1.0a consumer key / secret: {first.consumer_key} / {first.consumer_secret}")
    for account in service.accounts.values():
        auth = service.oauth1_auth_for(account)
        who = "" if len(service.accounts) == 1 else f" ({account.username})"
        print(f"  OAuth 1.0a token / secret{who}: {auth.token} / {auth.token_secret}")


if __name__ == "__main__":
    raise SystemExit(main())
