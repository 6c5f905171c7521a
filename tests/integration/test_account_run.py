"""One run of an account's sync: one outcome type, one mapping of failures, observers, logs."""

from __future__ import annotations

import argparse
import errno
import io
import json
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

import invoicing_async as ia
from invoicing_async._account_run import (
    AccountRun,
    Credentials,
    RunObserver,
    RunOutcome,
    exit_code,
    outcome_of_error,
)
from invoicing_async._cli.options import configure_logging
from invoicing_async._secrets import SecretError, SecretPolicy
from invoicing_async._sync.report import SyncProgress
from invoicing_async.sync import MemoryStore
from invoicing_async.testing import FakeInvoicingService


@pytest.mark.parametrize(
    ("error", "status", "text"),
    [
        (
            ia.RateLimitExceeded("spent", status=403, method="GET", url="/x", retry_after=60.0),
            "budget",
            "spent",
        ),
        (ia.AuthenticationError("no", status=401, method="GET", url="/x"), "error", "401"),
        (SecretError("$X (password) is not set"), "error", "$X (password) is not set"),
        (FileNotFoundError(errno.ENOENT, "No such file", "/nope.db"), "error", "/nope.db: No such"),
        (ssl.SSLError(1, "CERTIFICATE_VERIFY_FAILED"), "error", "TLS: "),
        (KeyError("boom"), "error", "KeyError: 'boom'"),
    ],
)
def test_one_mapping_from_failures_to_outcomes(error: Exception, status: str, text: str) -> None:
    outcome = outcome_of_error("acme", error)
    assert outcome.status == status
    assert outcome.error is not None
    assert text in outcome.error
    assert outcome.exit_code == (3 if status == "budget" else 1)


def test_exit_code_of_many_runs_is_the_worst() -> None:
    def of(*statuses: str) -> int:
        return exit_code([RunOutcome("a", s) for s in statuses])  # type: ignore[arg-type]

    assert of() == 0
    assert of("complete", "complete") == 0
    assert of("complete", "locked") == 3
    assert of("budget", "incomplete") == 3
    assert of("budget", "error", "complete") == 1


class Recorder(RunObserver):
    def __init__(self) -> None:
        self.events: list[str] = []
        self.final: RunOutcome | None = None

    def started(self, run: AccountRun) -> None:
        self.events.append(f"started {run.account}")

    def progress(self, run: AccountRun, progress: SyncProgress) -> None:
        self.events.append(f"progress {progress.done}/{progress.total}")

    def finished(self, run: AccountRun, outcome: RunOutcome) -> None:
        self.events.append(f"finished {outcome.status}")
        self.final = outcome


def json_log() -> io.StringIO:
    stream = io.StringIO()
    args = argparse.Namespace(verbose=1, log_level=None, log_format="json")
    configure_logging(args, stream=stream)
    return stream


async def test_a_run_tells_its_observers_and_logs_a_line_at_each_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = json_log()
    async with FakeInvoicingService(invoices=150, seed=2, tls=False) as service:
        monkeypatch.setenv("INVOICING_SECRET_RUN_TEST", service.password)
        recorder = Recorder()
        outcome = await AccountRun(
            account="acme",
            base_url=service.base_url,
            auth=Credentials(service.username, "env:INVOICING_SECRET_RUN_TEST"),
            open_store=MemoryStore,
            observers=(recorder,),
            schedule=lambda o: 86400.0 if o.status == "complete" else 900.0,
        ).run()
    assert (outcome.status, outcome.created, outcome.requests) == ("complete", 150, 3)
    assert outcome.due_in == 86400.0
    assert outcome.budget_left is not None
    assert recorder.events == [
        "started acme",
        "progress 100/150",
        "progress 150/150",
        "finished complete",
    ]
    assert recorder.final == outcome
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    runs = [x for x in lines if x["logger"] == "invoicing_async.run"]
    assert [x["event"] for x in runs] == ["run_started", "run_finished"]
    end = runs[-1]
    assert (end["account"], end["outcome"], end["requests"]) == ("acme", "complete", 3)
    assert (end["invoices_created"], end["next_due_in"]) == (150, 86400)
    assert end["budget_left"] == outcome.budget_left
    assert end["duration"] >= 0
    assert service.password not in stream.getvalue()


@asynccontextmanager
async def capture_server() -> AsyncIterator[tuple[str, list[str]]]:
    """A server on loopback that records every request it gets."""
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path_qs} {request.headers.get('Authorization')}")
        return web.Response(status=200)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


async def test_a_refused_reference_is_an_error_run_and_never_a_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INVOICING_DATABASE_URL", "postgresql://worker:db-password@db/x")
    elsewhere = tmp_path / "other-account"
    elsewhere.write_text("other-secret")
    elsewhere.chmod(0o600)
    (tmp_path / "secrets").mkdir()
    policy = SecretPolicy(secrets_dir=tmp_path / "secrets")
    async with capture_server() as (url, seen):
        for ref, why in [
            ("env:INVOICING_DATABASE_URL", "reads only variables named INVOICING_SECRET_*"),
            (f"file:{elsewhere}", "not under the secrets directory"),
        ]:
            outcome = await AccountRun(
                account="evil",
                base_url=url,
                auth=Credentials("u", ref),
                open_store=MemoryStore,
                secret_policy=policy,
            ).run()
            assert outcome.status == "error"
            assert outcome.error is not None
            assert why in outcome.error
    assert seen == []


async def test_a_bad_ca_file_and_a_held_lock_are_outcomes(tmp_path: Path) -> None:
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate")

    def run(**kwargs: object) -> AccountRun:
        return AccountRun(
            account="acme",
            base_url="https://127.0.0.1:9",
            auth=ia.BasicAuth("u", "p"),
            open_store=MemoryStore,
            **kwargs,  # type: ignore[arg-type]
        )

    missing = await run(ca_file=tmp_path / "nope.pem").run()
    assert (missing.status, missing.error) == (
        "error",
        f"CA file {tmp_path}/nope.pem: no such file",
    )
    bad = await run(ca_file=not_pem).run()
    assert bad.error is not None
    assert bad.error.startswith(f"CA file {not_pem}: not a PEM certificate")

    @asynccontextmanager
    async def held() -> AsyncIterator[bool]:
        yield False

    locked = await run(lock=held).run()
    assert (locked.status, locked.exit_code) == ("locked", 3)


async def test_log_lines_never_show_a_secret_read(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("INVOICING_SECRET_LOGGED", "very-secret-value")
    await Credentials("u", "env:INVOICING_SECRET_LOGGED").resolve(SecretPolicy())
    for log_format in ("text", "json"):
        stream = io.StringIO()
        configure_logging(
            argparse.Namespace(verbose=0, log_level="info", log_format=log_format), stream=stream
        )
        logging.getLogger("invoicing_async.test").info(
            "oops: %s", "very-secret-value", extra={"detail": "very-secret-value"}
        )
        assert "very-secret-value" not in stream.getvalue()
        assert "***" in stream.getvalue()


async def test_a_failing_observer_is_logged_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(RunObserver):
        def finished(self, run: AccountRun, outcome: RunOutcome) -> None:
            raise RuntimeError("metrics backend down")

    recorder = Recorder()
    async with FakeInvoicingService(invoices=5, seed=2, tls=False) as service:
        outcome = await AccountRun(
            account="acme",
            base_url=service.base_url,
            auth=ia.BasicAuth(service.username, service.password),
            open_store=MemoryStore,
            observers=(Broken(), recorder),
        ).run()
    assert outcome.status == "complete"
    assert recorder.events[-1] == "finished complete"
    assert "failed on finished" in caplog.text
