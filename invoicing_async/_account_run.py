"""One run of one account's sync: the single place that wires credentials, client, budget,
store and engine (for `sync`, `sync-many`, `demo` and the worker), logs its start and end,
and turns whatever happens into one `RunOutcome` (and its exit code)."""

from __future__ import annotations

import functools
import logging
import ssl
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from typing import Any, Literal

import aiohttp
import attrs

from invoicing_async._budget.budget import RateBudget
from invoicing_async._client import InvoicingClient
from invoicing_async._models.payloads import Format
from invoicing_async._secrets import SecretPolicy, parse_secret_ref, read_secret, redact
from invoicing_async._sync.engine import SyncEngine
from invoicing_async._sync.report import SyncProgress, SyncReport
from invoicing_async._sync.store import Store
from invoicing_async._text import package_logger
from invoicing_async._transport.auth import Auth, BasicAuth, OAuth1Auth
from invoicing_async.errors import ConfigurationError, InvoicingError, RateLimitExceeded

__all__ = [
    "EXIT_CODES",
    "AccountRun",
    "Credentials",
    "RunObserver",
    "RunOutcome",
    "RunStatus",
    "describe_failure",
    "exit_code",
    "load_ca",
    "outcome_of_error",
    "outcome_of_report",
]

logger = package_logger("invoicing_async.run")

#: `lost` is written by the jobs layer for a run whose worker died; a run never returns it.
RunStatus = Literal["complete", "incomplete", "budget", "locked", "error", "lost"]
#: The exit code of a command whose run ended so (the worst of several wins).
EXIT_CODES: dict[str, int] = {
    "complete": 0,
    "incomplete": 3,
    "budget": 3,
    "locked": 3,
    "error": 1,
    "lost": 1,
}


@attrs.frozen
class Credentials:
    """An account's credentials by reference (``env:VAR``, ``file:/path``), read when its run
    starts (a bad reference is that run's `error`). OAuth 1: `username` is the consumer key."""

    username: str
    secret: str
    oauth1: bool = False
    token: str | None = None
    token_secret: str | None = None

    async def resolve(self, policy: SecretPolicy) -> Auth:
        """The credentials with their secrets read now, under `policy`."""
        what = "consumer secret" if self.oauth1 else "password"
        secret = await read_secret(parse_secret_ref(self.secret, what), policy, what)
        if not self.oauth1:
            return BasicAuth(self.username, secret)
        if not self.token or not self.token_secret:
            raise ConfigurationError("OAuth 1 needs a token and its secret")
        ref = parse_secret_ref(self.token_secret, "token secret")
        token_secret = await read_secret(ref, policy, "token secret")
        return OAuth1Auth(self.username, secret, self.token, token_secret)


@attrs.frozen
class RunOutcome:
    """How one account's run ended: the one outcome type of the CLI and the jobs.

    `eta`: seconds until the budget allows the rest. `due_in`: when the account is due again
    (None: no schedule). `sent`: the requests sent, counted also for a run cut off."""

    account: str
    status: RunStatus
    report: SyncReport | None = None
    error: str | None = None
    eta: float | None = None
    seconds: float = 0.0
    budget_left: int | None = None
    due_in: float | None = None
    sent: int = 0

    @property
    def requests(self) -> int:
        return self.sent if self.report is None else max(self.report.requests, self.sent)

    @property
    def created(self) -> int:
        return 0 if self.report is None else self.report.created

    @property
    def updated(self) -> int:
        return 0 if self.report is None else self.report.updated

    @property
    def deleted(self) -> int:
        return 0 if self.report is None else self.report.deleted

    @property
    def total(self) -> int:
        return 0 if self.report is None else self.report.listed

    @property
    def done(self) -> int:
        return 0 if self.report is None else self.report.listed - len(self.report.pending)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.account,
            "status": self.status,
            "error": self.error,
            "eta": self.eta,
            "seconds": self.seconds,
            "budget_left": self.budget_left,
            "due_in": self.due_in,
            "report": None if self.report is None else self.report.to_dict(),
        }


def exit_code(outcomes: Sequence[RunOutcome]) -> int:
    """Of several runs: 1 if any failed, else 3 if any is not complete, else 0."""
    codes = {o.exit_code for o in outcomes}
    return 1 if 1 in codes else max(codes, default=0)


def outcome_of_report(account: str, report: SyncReport) -> RunOutcome:
    """The outcome of a run the engine finished (a dry run is complete when it planned)."""
    errors = redact("; ".join(report.errors)) or None
    if report.complete or (report.dry_run and not report.errors):
        return RunOutcome(account, "complete", report)
    if report.stopped_for_budget:
        eta = report.eta if report.eta is not None else 3600.0
        return RunOutcome(account, "budget", report, error=errors, eta=eta)
    return RunOutcome(account, "incomplete", report, error=errors)


def outcome_of_error(account: str, exc: Exception) -> RunOutcome:
    """The one mapping from what a run raised to its outcome; the text names what is at
    fault (file, URL, role) and never a secret."""
    if isinstance(exc, RateLimitExceeded):
        # A stop for the budget is "run again later", whichever request met it.
        eta = exc.retry_after if exc.retry_after is not None else 3600.0
        return RunOutcome(account, "budget", error=redact(str(exc)), eta=eta)
    text = describe_failure(exc) or f"{type(exc).__name__}: {exc}"
    return RunOutcome(account, "error", error=text)


def describe_failure(exc: BaseException) -> str | None:
    """One line for an expected failure (the service, TLS, a file, the budget store)
    naming what is at fault, secrets redacted; None for one nobody expected (a bug)."""
    if isinstance(exc, InvoicingError):
        text = str(exc)
    elif isinstance(exc, ssl.SSLError):
        text = f"TLS: {getattr(exc, 'reason', None) or exc}"
    elif isinstance(exc, OSError):
        text = str(exc) if exc.filename is None else f"{exc.filename}: {exc.strerror or exc}"
    else:
        return None
    return " ".join(redact(text).split())


def load_ca(path: str | Path) -> ssl.SSLContext:
    """A TLS context trusting the CA file too; `ConfigurationError` names a file that is
    missing, unreadable or not PEM."""
    try:
        return ssl.create_default_context(cafile=str(path))
    except FileNotFoundError:
        raise ConfigurationError(f"CA file {path}: no such file") from None
    except PermissionError:
        raise ConfigurationError(f"CA file {path}: permission denied") from None
    except ssl.SSLError as exc:
        raise ConfigurationError(
            f"CA file {path}: not a PEM certificate ({getattr(exc, 'reason', None) or exc})"
        ) from None
    except OSError as exc:
        raise ConfigurationError(f"CA file {path}: {exc.strerror or exc}") from None


class RunObserver:
    """Told of a run's start, each committed batch and its outcome (on the run's task; must
    not block); the hook point for metrics and tracing."""

    def started(self, run: AccountRun) -> None:
        """The run is about to read its secrets and open its client and store."""

    def progress(self, run: AccountRun, progress: SyncProgress) -> None:
        """A batch was committed."""

    def finished(self, run: AccountRun, outcome: RunOutcome) -> None:
        """The outcome is final (its `due_in` included); also called when cancelled."""


@attrs.frozen(kw_only=True)
class AccountRun:
    """Everything one run of one account needs; `await run()` gives its outcome.

    `open_store` and `new_budget` make this run's store and budget. `session`: an aiohttp
    session to borrow, shared by runs, so it must keep no cookies. `lock`, entered first,
    yields False when another run holds the account (outcome `locked`). `schedule` turns the
    outcome into the seconds until the account is due again."""

    account: str
    base_url: str
    auth: Auth | Credentials
    open_store: Callable[[], AbstractAsyncContextManager[Store]]
    new_budget: Callable[[], RateBudget] = RateBudget
    format: Format = "xml"
    ca_file: str | Path | None = None
    lock: Callable[[], AbstractAsyncContextManager[bool]] | None = None
    secret_policy: SecretPolicy = attrs.field(factory=SecretPolicy)
    concurrency: int = 4
    dry_run: bool = False
    wait_for_budget: bool = False
    force_deletions: bool = False
    observers: Sequence[RunObserver] = ()
    progress: bool = False  # draw the engine's progress bar (SyncEngine(progress=True))
    schedule: Callable[[RunOutcome], float] | None = None
    session: aiohttp.ClientSession | None = None

    async def run(self) -> RunOutcome:
        """Run the sync once; every failure is an outcome, never an exception (a
        cancellation is told to the observers, then raised)."""
        started = time.monotonic()
        logger.info(
            "account %s: run started (%s)",
            self.account,
            self.base_url,
            extra={"event": "run_started", "account": self.account},
        )
        self._tell("started", self)
        spent = _Spent()
        try:
            outcome = await self._run(spent)
        except Exception as exc:
            outcome = outcome_of_error(self.account, exc)
            if describe_failure(exc) is None:
                logger.debug("account %s: unexpected failure", self.account, exc_info=True)
        except BaseException:
            outcome = RunOutcome(self.account, "error", error="stopped: the run was cancelled")
            self._finish(outcome, started, spent)
            raise
        return self._finish(outcome, started, spent)

    async def _run(self, spent: _Spent) -> RunOutcome:
        async with AsyncExitStack() as stack:
            if self.lock is not None and not await stack.enter_async_context(self.lock()):
                return RunOutcome(
                    self.account, "locked", error="another run of this account holds its lock"
                )
            auth = self.auth
            if isinstance(auth, Credentials):
                auth = await auth.resolve(self.secret_policy)
            context = None if self.ca_file is None else load_ca(self.ca_file)
            budget = self.new_budget()
            stack.push_async_callback(budget.close)
            stack.callback(lambda: setattr(spent, "budget_left", budget.snapshot().remaining))
            client = await stack.enter_async_context(
                InvoicingClient(
                    self.base_url,
                    auth=auth,
                    format=self.format,
                    ssl=context,
                    budget=budget,
                    session=self.session,
                )
            )
            spent.client = client
            store = await stack.enter_async_context(self.open_store())
            engine = SyncEngine(
                client,
                store,
                concurrency=self.concurrency,
                dry_run=self.dry_run,
                wait_for_budget=self.wait_for_budget,
                force_deletions=self.force_deletions,
                on_progress=functools.partial(self._tell, "progress", self)
                if self.observers
                else None,
                progress=self.progress,
            )
            report = await engine.run()
        return outcome_of_report(self.account, report)

    def _tell(self, event: str, *args: Any) -> None:
        """Call each observer's `event`; a failing observer is logged, never the run's end."""
        for observer in self.observers:
            try:
                getattr(observer, event)(*args)
            except Exception:
                logger.warning("observer %r failed on %s", observer, event, exc_info=True)

    def _finish(self, outcome: RunOutcome, started: float, spent: _Spent) -> RunOutcome:
        outcome = attrs.evolve(
            outcome,
            seconds=time.monotonic() - started,
            budget_left=spent.budget_left,
            sent=0 if spent.client is None else spent.client.requests_sent,
        )
        if self.schedule is not None:
            outcome = attrs.evolve(outcome, due_in=self.schedule(outcome))
        self._tell("finished", self, outcome)
        _log_end(outcome)
        return outcome


@attrs.define
class _Spent:
    """What a run spent, read when it ends however it ends: its client (the requests
    sent) and the budget left."""

    client: InvoicingClient | None = None
    budget_left: int | None = None


_LEVELS = {"error": logging.ERROR, "lost": logging.ERROR, "budget": logging.WARNING}


def _log_end(outcome: RunOutcome) -> None:
    fields: dict[str, Any] = {
        "event": "run_finished",
        "account": outcome.account,
        "outcome": outcome.status,
        "requests": outcome.requests,
        # (`created` is a `LogRecord` attribute of its own.)
        "invoices_created": outcome.created,
        "invoices_updated": outcome.updated,
        "invoices_deleted": outcome.deleted,
        "duration": round(outcome.seconds, 3),
        "budget_left": outcome.budget_left,
        "next_due_in": None if outcome.due_in is None else round(outcome.due_in),
        "error": outcome.error,
    }
    text = (
        f"account {outcome.account}: {outcome.status}; {outcome.requests} requests, "
        f"{outcome.created} created, {outcome.updated} updated, {outcome.deleted} deleted "
        f"in {outcome.seconds:.1f}s"
    )
    if outcome.budget_left is not None:
        text += f"; budget left {outcome.budget_left}"
    if outcome.due_in is not None:
        text += f"; next due in {outcome.due_in:.0f}s"
    if outcome.error:
        text += f"; {outcome.error}"
    logger.log(_LEVELS.get(outcome.status, logging.INFO), "%s", text, extra=fields)
