"""What an account row or the service holds reaches a terminal or a log line escaped:
no escape sequence redraws the screen, no newline forges a line (issue 37, point 7)."""

from __future__ import annotations

import io
import logging

import pytest

from invoicing_async._logs import TextFormatter, printable

FORGED = "bad request\n2026-11-25 10:00:00,000 INFO invoicing_async: all good\x1b[2J\x1b]0;x\x07"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain é ☃ text", "plain é ☃ text"),
        ("a\x1b[31mred", "a\\x1b[31mred"),
        ("two\nlines\r", "two\\nlines\\r"),
        ("tab\there", "tab\\there"),
        ("rtl\u202eevil", "rtl\\u202eevil"),
        ("nul\x00 del\x7f c1\x9b", "nul\\x00 del\\x7f c1\\x9b"),
    ],
)
def test_printable_escapes_what_a_terminal_would_act_on(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert printable(shown).isprintable()


def test_a_text_log_line_escapes_its_message_and_its_traceback() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(TextFormatter())
    logger = logging.getLogger("invoicing_async.test_terminal")
    logger.addHandler(handler)
    try:
        try:
            raise ValueError(FORGED)
        except ValueError:
            logger.error("run failed for %s: %s", "acme", FORGED, exc_info=True)
    finally:
        logger.removeHandler(handler)
    first, *trace = out.getvalue().splitlines()
    assert first.endswith(
        "ERROR invoicing_async.test_terminal: run failed for acme: bad request\\n2026-11-25 "
        "10:00:00,000 INFO invoicing_async: all good\\x1b[2J\\x1b]0;x\\x07"
    )
    assert trace[0] == "Traceback (most recent call last):"
    assert trace[-1] == f"ValueError: {printable(FORGED)}"
    assert out.getvalue().replace("\n", "").isprintable()
