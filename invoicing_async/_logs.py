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
from invoicing_async._text import printable

__all__ = [
    "LEVELS",
    "JsonFormatter",
    "TextFormatter",
    "configure_from_env",
    "install",
    "json_from_env",
    "level_from_env",
    "printable",
    "report_error",
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


def _one_line(exc_info: Any) -> str:
    """An exception as ``Type: message`` (its cause's too), without its traceback."""
    exc, seen, parts = exc_info[1], set(), list[str]()
    while exc is not None and id(exc) not in seen and len(parts) < 3:
        seen.add(id(exc))
        message = " ".join(str(exc).split())
        parts.append(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)
        exc = exc.__cause__ or exc.__context__
    return " <- ".join(parts)


def _without_traceback(record: logging.LogRecord) -> logging.LogRecord:
    """A copy of `record` whose exception is one line at the end of its message."""
    copy = logging.makeLogRecord(vars(record))
    copy.msg, copy.args = record.getMessage(), None
    if record.exc_info and record.exc_info[1] is not None:
        copy.msg = f"{copy.msg} ({_one_line(record.exc_info)})"
    copy.exc_info, copy.exc_text, copy.stack_info = None, None, None
    return copy


class TextFormatter(logging.Formatter):
    """``time level logger: message``, with every known secret replaced by ``***``; one
    line a message (control characters escaped), then any traceback (with `tracebacks`;
    else the exception on the message's line)."""

    def __init__(self, *, tracebacks: bool = True) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if not self.tracebacks:
            record = _without_traceback(record)
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
    """One JSON object a line: time, level, logger, message and the record's extra fields;
    the traceback under `exception` with `tracebacks`, else the exception on the message."""

    def __init__(self, *, tracebacks: bool = True) -> None:
        super().__init__()
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if not self.tracebacks:
            record = _without_traceback(record)
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


class _Unclaimed(logging.Filter):
    """Passes a record only while the root logger has no handler: once the app logs
    (to its own handler), the package's `INVOICING_LOG` output yields, not doubling it."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: ARG002 - any record
        return not logging.getLogger().handlers


_installed: list[tuple[logging.Logger, logging.Handler]] = []


def install(
    level: int | None,
    *,
    json_lines: bool = False,
    stream: IO[str] | None = None,
    on: logging.Logger | None = None,
    yielding: bool = False,
) -> None:
    """Log to stderr (or `stream`) from `level` up, through the handler of `on` (the root
    logger by default), replacing the one before; None: nothing at all. `yielding`: only
    while the app has no handler of its own on the root logger. Tracebacks are written
    only from `DEBUG`; above, an exception is one line on its record's."""
    target = logging.getLogger() if on is None else on
    for logger, old in _installed:
        logger.removeHandler(old)
    _installed.clear()
    handler: logging.Handler
    if level is None:
        handler = logging.NullHandler()
    else:
        handler = logging.StreamHandler(stream) if stream is not None else _Stderr()
        # Tracebacks only when debugging (`-vv`): other libraries' included.
        tracebacks = level <= logging.DEBUG
        formatter = JsonFormatter if json_lines else TextFormatter
        handler.setFormatter(formatter(tracebacks=tracebacks))
        handler.addFilter(_Levels(level))
        if yielding:
            handler.addFilter(_Unclaimed())
        logging.getLogger(PACKAGE).setLevel(level)
    target.addHandler(handler)
    _installed.append((target, handler))


def report_error(text: str) -> None:
    """A command's failure, ``error: text`` on stderr: a JSON line (level `error`, event
    `command_failed`) when the log is JSON lines, so a log shipper reads every line."""
    line = f"error: {printable(text)}"
    formatter = _installed[0][1].formatter if _installed else None
    if isinstance(formatter, JsonFormatter):
        record = logging.makeLogRecord(
            {"name": "invoicing_async.cli", "levelno": logging.ERROR, "levelname": "ERROR"}
        )
        record.msg, record.event = line, "command_failed"
        line = formatter.format(record)
    print(line, file=sys.stderr)


_warned: set[str] = set()


def _warn_once(variable: str, accepted: str, stream: IO[str] | None) -> None:
    """One line on stderr, once a process, for a variable whose value means nothing."""
    if variable not in _warned:
        _warned.add(variable)
        print(
            f"invoicing_async: {variable} is not one of {accepted}: ignored",
            file=sys.stderr if stream is None else stream,
        )


def level_from_env(
    environ: Mapping[str, str] | None = None, *, stream: IO[str] | None = None
) -> int | None:
    """The level `INVOICING_LOG` names, or None when unset or not a level's name (then
    one warning on stderr names the accepted ones)."""
    name = (os.environ if environ is None else environ).get("INVOICING_LOG", "").strip().lower()
    if name in LEVELS:
        return int(logging.getLevelName(name.upper()))
    if name:
        _warn_once("INVOICING_LOG", ", ".join(LEVELS), stream)
    return None


def json_from_env(
    environ: Mapping[str, str] | None = None, *, stream: IO[str] | None = None
) -> bool:
    """Whether ``INVOICING_LOG_FORMAT=json`` asks for JSON lines (a value neither `text`
    nor `json` is one warning on stderr)."""
    env = os.environ if environ is None else environ
    name = env.get("INVOICING_LOG_FORMAT", "").strip().lower()
    if name not in ("", "text", "json"):
        _warn_once("INVOICING_LOG_FORMAT", "text, json", stream)
    return name == "json"


def configure_from_env(
    environ: Mapping[str, str] | None = None, *, stream: IO[str] | None = None
) -> bool:
    """With `INVOICING_LOG` set, log the package's records to stderr from that level, as
    text or (``INVOICING_LOG_FORMAT=json``) JSON lines; whether it was set."""
    env = os.environ if environ is None else environ
    level = level_from_env(env, stream=stream)
    if level is None:
        return False
    json_lines = json_from_env(env, stream=stream)
    install(
        level, json_lines=json_lines, stream=stream, on=logging.getLogger(PACKAGE), yielding=True
    )
    return True
