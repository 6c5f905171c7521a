"""Text a server or a file may control, made safe to show: `printable` escapes what a
terminal or a log reader would act on; `package_logger` escapes every record's message
itself, so any handler (Python's last resort, an app's own) writes it inert."""

from __future__ import annotations

import logging

__all__ = ["package_logger", "printable"]


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
