"""Logging for the commands: text or JSON lines on stderr, secrets redacted, control
characters escaped (`printable`: what a service or an account row holds never moves the
cursor, recolours the terminal or starts a forged line).

The `worker` logs its runs by default (level info); the other commands print their own
report and log nothing unless asked (`-v`, `--log-level`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys
from typing import IO, Any

from invoicing_async._secrets import redact

__all__ = ["JsonFormatter", "TextFormatter", "configure_logging", "printable"]

#: Attributes every `LogRecord` has; anything else was given as `extra=` and is a field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


def printable(text: str) -> str:
    """`text` safe to show on a terminal or in a log line: every character that
    `str.isprintable` refuses (escapes, newlines, tabs, bidi controls) written as its
    Python escape, as `repr` shows it (``\\x1b``, ``\\n``, ``\\u202e``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class TextFormatter(logging.Formatter):
    """``time level logger: message``, with every known secret replaced by ``***``; one
    line a message (control characters escaped), then any traceback."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        escaped = logging.makeLogRecord(vars(record))
        escaped.msg, escaped.args = printable(record.getMessage()), None
        escaped.exc_text = None  # made again by `formatException`, escaped
        return redact(super().format(escaped))

    def formatException(self, ei: Any) -> str:
        """The traceback's own lines kept; its exceptions' messages (which may quote the
        service) on one line each, and control characters anywhere escaped."""
        text = super().formatException(ei)
        exc, seen = ei[1], set()
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            message = str(exc)
            if not message.isprintable():
                text = text.replace(message, printable(message))
            exc = exc.__cause__ or exc.__context__
        return "\n".join(printable(line) for line in text.split("\n"))


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message and the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        data.update((k, v) for k, v in vars(record).items() if k not in _STANDARD)
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(_redacted(data), default=str)


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    return value


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at the time (it may be replaced after setup)."""

    @property
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, value: IO[str]) -> None:
        pass


class _Levels(logging.Filter):
    """The package's records from `level` up; other libraries' from warnings up."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        ours = record.name == "invoicing_async" or record.name.startswith("invoicing_async.")
        return record.levelno >= (self.level if ours else max(self.level, logging.WARNING))


_installed: list[logging.Handler] = []


def configure_logging(
    args: argparse.Namespace, *, default: int | None = None, stream: IO[str] | None = None
) -> None:
    """Log to stderr (or `stream`) at the level the options ask, else at `default`;
    None: nothing at all (not even Python's last-resort printing of warnings)."""
    level: int | None = default
    if args.log_level:
        level = logging.getLevelName(args.log_level.upper())
    elif args.verbose:
        level = logging.INFO if args.verbose == 1 else logging.DEBUG
    root = logging.getLogger()
    for old in _installed:
        root.removeHandler(old)
    _installed.clear()
    handler: logging.Handler
    if level is None:
        handler = logging.NullHandler()
    else:
        handler = logging.StreamHandler(stream) if stream is not None else _Stderr()
        handler.setFormatter(JsonFormatter() if args.log_format == "json" else TextFormatter())
        handler.addFilter(_Levels(level))
        logging.getLogger("invoicing_async").setLevel(level)
    root.addHandler(handler)
    _installed.append(handler)
