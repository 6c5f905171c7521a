"""Issue #42, point 9: the log shows no traceback unless debugging (`-vv`), whoever logged
it (procrastinate, asyncio), and a command's failure is a JSON line under JSON logging."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator

import pytest

from invoicing_async._logs import install, report_error


@contextlib.contextmanager
def logged(level: int, *, json_lines: bool) -> Iterator[io.StringIO]:
    out = io.StringIO()
    install(level, json_lines=json_lines, stream=out)
    try:
        yield out
    finally:
        install(None)


def log_a_failure() -> None:
    try:
        try:
            raise OSError("connection refused")
        except OSError as exc:
            raise RuntimeError("\n    Database error.\n    ") from exc
    except RuntimeError:
        logging.getLogger("procrastinate.worker").error("side task failed", exc_info=True)


@pytest.mark.parametrize("json_lines", [False, True])
def test_no_traceback_above_debug_but_the_exception_on_one_line(json_lines: bool) -> None:
    with logged(logging.INFO, json_lines=json_lines) as out:
        log_a_failure()
    [line] = out.getvalue().splitlines()
    assert "Traceback" not in line
    shown = json.loads(line)["message"] if json_lines else line
    assert shown.endswith(
        "side task failed (RuntimeError: Database error. <- OSError: connection refused)"
    )


@pytest.mark.parametrize("json_lines", [False, True])
def test_debugging_keeps_the_traceback(json_lines: bool) -> None:
    with logged(logging.DEBUG, json_lines=json_lines) as out:
        log_a_failure()
    assert "Traceback (most recent call last)" in out.getvalue()


def test_a_commands_failure_is_a_json_line_under_json_logging(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with logged(logging.INFO, json_lines=True):
        report_error("the job worker stopped: \x1b[2J")
    line = json.loads(capsys.readouterr().err)
    assert line["level"] == "error"
    assert line["event"] == "command_failed"
    assert line["message"] == "error: the job worker stopped: \\x1b[2J"
    with logged(logging.INFO, json_lines=False):
        report_error("plain")
    assert capsys.readouterr().err == "error: plain\n"
