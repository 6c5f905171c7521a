"""The package's log output: text or JSON lines on stderr, secrets redacted, control
characters escaped (`printable`). Set up by the commands' options, or for library users by
``INVOICING_LOG=debug|info|warning`` (and ``INVOICING_LOG_FORMAT=json``) at import."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
from collections.abc import Mapping
from typing import IO, Any

from invoicing_async._secrets import redact

__all__ = [
    "LEVELS",
    "JsonFormatter",
    "TextFormatter",
    "configure_from_env",
    "install",
    "json_from_env",
    "level_from_env",
    "printable",
]

PACKAGE = "invoicing_async"
#: The names `INVOICING_LOG` and `--log-level` take.
LEVELS = ("debug", "info", "warning", "error", "critical")

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
        ours = record.name == PACKAGE or record.name.startswith(PACKAGE + ".")
        return record.levelno >= (self.level if ours else max(self.level, logging.WARNING))


_installed: list[tuple[logging.Logger, logging.Handler]] = []


def install(
    level: int | None,
    *,
    json_lines: bool = False,
    stream: IO[str] | None = None,
    on: logging.Logger | None = None,
) -> None:
    """Log to stderr (or `stream`) from `level` up, through the handler of `on` (the root
    logger by default), replacing the one before; None: nothing at all."""
    target = logging.getLogger() if on is None else on
    for logger, old in _installed:
        logger.removeHandler(old)
    _installed.clear()
    handler: logging.Handler
    if level is None:
        handler = logging.NullHandler()
    else:
        handler = logging.StreamHandler(stream) if stream is not None else _Stderr()
        handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
        handler.addFilter(_Levels(level))
        logging.getLogger(PACKAGE).setLevel(level)
    target.addHandler(handler)
    _installed.append((target, handler))


def level_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """The level `INVOICING_LOG` names, or None when unset or not a level's name."""
    name = (os.environ if environ is None else environ).get("INVOICING_LOG", "").strip().lower()
    return logging.getLevelName(name.upper()) if name in LEVELS else None


def json_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``INVOICING_LOG_FORMAT=json`` asks for JSON lines."""
    env = os.environ if environ is None else environ
    return env.get("INVOICING_LOG_FORMAT", "").strip().lower() == "json"


def configure_from_env(
    environ: Mapping[str, str] | None = None, *, stream: IO[str] | None = None
) -> bool:
    """With `INVOICING_LOG` set, log the package's records to stderr from that level, as
    text or (``INVOICING_LOG_FORMAT=json``) JSON lines; whether it was set."""
    env = os.environ if environ is None else environ
    level = level_from_env(env)
    if level is None:
        return False
    install(level, json_lines=json_from_env(env), stream=stream, on=logging.getLogger(PACKAGE))
    return True
