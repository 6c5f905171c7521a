"""The package's log: a refused call is one warning; `INVOICING_LOG` turns the log on
without code (text or JSON lines on stderr); no secret shows at any level."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

import invoicing_async as ia
from invoicing_async import _logs
from tests.scripted import ScriptedAPI, scripted_client

API = "/api/v1.0"
PASSWORD = "s3cret-pw"
OAUTH = ("consumer-key-1", "consumer-secret-1", "token-key-1", "token-secret-1")
PACKAGE = logging.getLogger("invoicing_async")


@pytest.fixture(autouse=True)
def _package_logger() -> Iterator[None]:
    """What `INVOICING_LOG` installs on the package's logger is undone after each test."""
    handlers, level = list(PACKAGE.handlers), PACKAGE.level
    yield
    PACKAGE.handlers[:] = handlers
    PACKAGE.setLevel(level)


async def test_a_call_refused_for_budget_is_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    api = ScriptedAPI()
    api.reply("GET", f"{API}/invoices/1.xml", 200, b"<invoice><id>1</id></invoice>")
    caplog.set_level(logging.DEBUG, logger="invoicing_async")
    async with scripted_client(api, budget=ia.RateBudget(limit=1), max_wait=0) as client:
        await client.invoices.get(1)
        caplog.clear()
        with pytest.raises(ia.RateLimitExceeded) as refused:
            await client.invoices.get(1)
    assert len(api.seen) == 1  # the second call never left
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    (record,) = warnings
    message = record.getMessage()
    assert record.name == "invoicing_async"
    assert "acme.example.com" in message
    assert "/invoices/1.xml" in message
    assert "max_wait=0s" in message
    assert "0 left" in message
    wait = refused.value.retry_after
    assert wait is not None
    assert wait > 3000  # a unit comes back an hour after its use
    assert f"~{wait:.0f}s" in message
    assert (record.host, record.would_wait, record.budget_left) == (  # type: ignore[attr-defined]
        "acme.example.com",
        wait,
        0,
    )


def test_invoicing_log_turns_the_log_on_at_import() -> None:
    """A program that only imports the package logs when the variable asks, as the CLI's
    `--log-level` does: the package's records from that level up, on stderr."""
    program = (
        "import logging, invoicing_async\n"
        "log = logging.getLogger('invoicing_async.transport')\n"
        "log.debug('debug line'); log.info('info line'); log.warning('warning line')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_LOG")}

    def stderr(**variables: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", program],
            env={**env, **variables},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert done.stdout == ""
        return done.stderr

    assert stderr() == "warning line\n"  # unset: Python's last resort, bare warnings only
    text = stderr(INVOICING_LOG="info")
    assert "INFO invoicing_async.transport: info line" in text
    assert "warning line" in text
    assert "debug line" not in text
    assert "debug line" in stderr(INVOICING_LOG="debug")
    assert "info line" not in stderr(INVOICING_LOG="warning")
    lines = [
        json.loads(line)
        for line in stderr(INVOICING_LOG="info", INVOICING_LOG_FORMAT="json").splitlines()
    ]
    assert [(line["level"], line["message"]) for line in lines] == [
        ("info", "info line"),
        ("warning", "warning line"),
    ]
    assert all(line["logger"] == "invoicing_async.transport" for line in lines)


def test_an_unknown_level_turns_nothing_on() -> None:
    assert _logs.configure_from_env({"INVOICING_LOG": "loud"}) is False
    assert _logs.configure_from_env({}) is False
    assert _logs.level_from_env({"INVOICING_LOG": " Debug "}) == logging.DEBUG


@contextlib.contextmanager
def bare_root() -> Iterator[logging.Logger]:
    """The root logger as an app that configured nothing has it: pytest's own handlers
    (added for each test's call) put back after."""
    root = logging.getLogger()
    kept = list(root.handlers)
    root.handlers[:] = []
    try:
        yield root
    finally:
        root.handlers[:] = kept


class Kept(logging.Handler):
    """An app's plain handler: the default formatter, every message kept."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


FORGED = r"name\x1b[2J\u202e\nWARNING invoicing_async: forged"


@pytest.mark.parametrize(
    "logger", ["invoicing_async.sync", "invoicing_async", "invoicing_async.push"]
)
def test_server_text_is_escaped_in_the_message_for_any_handler(logger: str) -> None:
    """A field name with ESC, U+202E and a newline reaches an app's plain handler (and
    Python's last resort) as one inert line."""
    import invoicing_async._push.receiver
    import invoicing_async._sync.fetching
    import invoicing_async._transport.http  # noqa: F401

    app = Kept()
    with bare_root() as root:
        root.addHandler(app)
        name = "name\x1b[2J\u202e\nWARNING invoicing_async: forged"
        logging.getLogger(logger).warning("invoice %d %s: quarantined", 7, name)
    assert app.lines == [f"invoice 7 {FORGED}: quarantined"]


def test_the_switch_yields_to_an_apps_own_handler() -> None:
    """With INVOICING_LOG set, an app's handler once got each record and stderr had it
    twice; the switch writes only while the app has no handler of its own."""
    stream = io.StringIO()
    assert _logs.configure_from_env({"INVOICING_LOG": "info"}, stream=stream)
    log = logging.getLogger("invoicing_async.sync")
    app = Kept()
    with bare_root() as root:
        log.info("before the app's handler")
        root.addHandler(app)
        log.info("with it")
        log.warning("and a warning")
    assert stream.getvalue().count("\n") == 1
    assert "before the app's handler" in stream.getvalue()
    assert app.lines == ["with it", "and a warning"]


@pytest.mark.parametrize(
    "variables",
    [
        {"INVOICING_LOG": "verbose"},
        {"INVOICING_LOG": "10"},
        {"INVOICING_LOG": "info", "INVOICING_LOG_FORMAT": "xml"},
    ],
)
def test_an_unknown_log_setting_is_one_warning_naming_the_accepted_values(
    variables: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_logs, "_warned", set())
    stream = io.StringIO()
    for _ in range(3):
        _logs.configure_from_env(variables, stream=stream)
    (line,) = stream.getvalue().splitlines()
    variable = "INVOICING_LOG_FORMAT" if "INVOICING_LOG_FORMAT" in variables else "INVOICING_LOG"
    assert line.startswith(f"invoicing_async: {variable} is not one of ")
    assert (
        "text, json" if "FORMAT" in variable else "debug, info, warning, error, critical"
    ) in line


@pytest.mark.parametrize("log_format", ["text", "json"])
@pytest.mark.parametrize("auth", ["basic", "oauth1"])
async def test_no_secret_at_any_level(log_format: str, auth: str) -> None:
    """Debug logging of calls that succeed, are retried, fail and are refused shows none
    of the credentials nor the Authorization header sent."""
    stream = io.StringIO()
    environ = {"INVOICING_LOG": "debug", "INVOICING_LOG_FORMAT": log_format}
    assert _logs.configure_from_env(environ, stream=stream)
    credentials: ia.Auth = (
        ia.BasicAuth("api-user", PASSWORD) if auth == "basic" else ia.OAuth1Auth(*OAUTH)
    )
    api = ScriptedAPI()
    api.reply("GET", f"{API}/invoices/1.xml", 503, b"busy")
    api.reply("GET", f"{API}/invoices/1.xml", 200, b"<invoice><id>1</id></invoice>")
    api.reply("GET", f"{API}/invoices/2.xml", 401, b"no")
    budget = ia.RateBudget(limit=3)
    with bare_root():  # the switch writes only while the app logs nowhere itself
        async with scripted_client(api, auth=credentials, budget=budget, max_wait=0) as client:
            await client.invoices.get(1)
            with pytest.raises(ia.AuthenticationError):
                await client.invoices.get(2)
            with pytest.raises(ia.RateLimitExceeded):
                await client.invoices.get(3)
    logged = stream.getvalue()
    assert "retry 1/2" in logged  # the retry, at WARNING
    assert "refused without sending" in logged
    assert "-> 200" in logged  # each request, at DEBUG
    sent = {seen.headers["Authorization"] for seen in api.seen}
    secrets = {PASSWORD, *OAUTH[1::2], *sent}
    secrets.add(base64.b64encode(f"api-user:{PASSWORD}".encode()).decode())
    assert [secret for secret in secrets if secret in logged] == []
