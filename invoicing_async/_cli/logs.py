"""Logging for the commands: text or JSON lines on stderr, secrets redacted.

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

__all__ = ["JsonFormatter", "TextFormatter", "configure_logging"]

#: Attributes every `LogRecord` has; anything else was given as `extra=` and is a field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
_QUIET = logging.CRITICAL + 10


class TextFormatter(logging.Formatter):
    """``time level logger: message``, with every known secret replaced by ``***``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


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


def configure_logging(
    args: argparse.Namespace, *, default: int = _QUIET, stream: IO[str] | None = None
) -> None:
    """Send the package's log to stderr at the level the options ask (else `default`)."""
    if args.log_level:
        level = logging.getLevelName(args.log_level.upper())
    elif args.verbose:
        level = logging.INFO if args.verbose == 1 else logging.DEBUG
    else:
        level = default
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if args.log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    # Other libraries (aiohttp, psycopg, procrastinate) speak only of warnings and worse.
    root.setLevel(max(level, logging.WARNING))
    logging.getLogger("invoicing_async").setLevel(level)
