"""Text a server or a file may control, made safe to show: `printable` escapes what a
terminal or a log reader would act on; `package_logger` escapes every record's message
itself, so any handler (Python's last resort, an app's own) writes it inert; `moved_name`
serves a public name that moved, with a warning that says where."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping

__all__ = ["moved_name", "package_logger", "printable"]


def printable(text: str) -> str:
    """`text` safe to show on a terminal or in a log line: every character that
    `str.isprintable` refuses (escapes, newlines, tabs, bidi controls) written as its
    Python escape, as `repr` shows it (``\\x1b``, ``\\n``, ``\\u202e``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class _Escaped(logging.Filter):
    """Writes each record's message, its arguments merged, with control characters
    escaped; a handler then has nothing left to interpret."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.isprintable():
            record.msg, record.args = printable(message), None
        return True


_ESCAPED = _Escaped()


def package_logger(name: str) -> logging.Logger:
    """The package's logger `name`, whose records reach every handler escaped."""
    logger = logging.getLogger(name)
    if _ESCAPED not in logger.filters:
        logger.addFilter(_ESCAPED)
    return logger


def moved_name(module: str, name: str, moved: Mapping[str, object], to: str) -> object:
    """For a module's `__getattr__`: a name that moved to module `to`, still served here with
    a `DeprecationWarning` naming its new place (the old name goes in 1.0)."""
    if name not in moved:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} moved to {to}.{name}; the old name goes in 1.0",
        DeprecationWarning,
        stacklevel=3,
    )
    return moved[name]
