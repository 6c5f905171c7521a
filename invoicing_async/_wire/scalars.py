"""Scalar parsing shared by both formats: exact decimals, ISO dates and aware datetimes."""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from invoicing_async.errors import DecodeError

_TRUE = frozenset({"true", "1", "t", "yes"})
_FALSE = frozenset({"false", "0", "f", "no", ""})
# Larger numbers than this are no real money or id and would let a hostile body make
# int() or Decimal arithmetic spend unbounded CPU.
MAX_NUMBER_CHARS = 200
_FRACTION = re.compile(r"[.,]([0-9]+)")
# No amount or rate is beyond 10**100 or below 10**-100; `1e99999999999` would be a
# 100-gigabyte number the moment anything formats it.
MAX_DECIMAL_EXPONENT = 100
# What one response may make the decoder build (counted before parsing, from commas or
# tags): a 1,000,000-invoice sync list is about 3,000,000, a list of 50,000 invoices about
# 6,000,000; 10,000,000 of the smallest objects stay under a gigabyte. Past it, 58 KB of
# gzip could grow into gigabytes of objects.
MAX_ELEMENTS = 10_000_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Rails documents nest five levels (invoices > invoice > details > detail > field); a
# hundred leaves room for any real extension and refuses a pathological one early. Both
# formats and every reader (the C check, the converter, the XML reader) apply this one.
MAX_DEPTH = 100


#: A `TextCache` keeps this many texts of at most this many characters (a date, a time
#: or an amount the service writes is far shorter): at most a few hundred KiB in all.
MOST_CACHED_TEXTS = 4096
MOST_CACHED_CHARS = 64


class TextCache(dict[str, Any]):
    """Values parsed from text, by text: `cache[text]` (or `cache.__getitem__`, a call in C)
    parses a text not seen yet; a refusal raises. Amounts, dates and times repeat within a
    document and across a sync; parsed once, the same immutable value is reused. Holds up
    to 4,096 texts of at most 64 characters each (a longer one is parsed, not kept), so
    what it holds is bounded in bytes, not only in count; safe across threads."""

    def __init__(self, parse: Callable[[str], Any]) -> None:
        super().__init__()
        self.parse = parse

    def __missing__(self, text: str) -> Any:
        value = self.parse(text)
        if len(text) <= MOST_CACHED_CHARS:
            if len(self) >= MOST_CACHED_TEXTS:
                self.clear()
            self[text] = value
        return value


def _ascii_number(text: str) -> bool:
    """Only what the service writes in a number: ASCII, no "_" (which `Decimal()` takes)."""
    return text.isascii() and "_" not in text


def parse_decimal(text: str) -> Decimal:
    """Exact decimal from text; never through float. Refuses NaN and infinities, and
    digits other than ASCII ones."""
    if len(text) > MAX_NUMBER_CHARS:
        raise DecodeError(f"number too long ({len(text)} characters)")
    if not _ascii_number(text):
        raise DecodeError(f"not a decimal number: {text[:40]!r}")
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise DecodeError(f"not a decimal number: {text[:40]!r}") from None
    why = decimal_out_of_bounds(value)
    if why is not None:
        raise DecodeError(f"{why}: {text[:40]!r}")
    return value


def decimal_out_of_bounds(value: Decimal) -> str | None:
    """Why a decimal is no amount or rate the service sends or takes (None when it is):
    the bounds every decoder keeps, and every encoder before it writes one."""
    if not value.is_finite():
        return "not a finite decimal number"
    if value and abs(value.adjusted()) > MAX_DECIMAL_EXPONENT:
        return f"decimal out of range (exponent beyond ±{MAX_DECIMAL_EXPONENT})"
    if len(value.as_tuple().digits) > MAX_NUMBER_CHARS:
        return f"decimal of more than {MAX_NUMBER_CHARS} digits"
    return None


def count_in(raw: bytes, needle: bytes) -> int:
    """`raw.count(needle)` a megabyte at a time: one call over 50 MB holds the interpreter
    for ~20 ms, and decoding runs in a worker thread beside the event loop."""
    window = 1 << 20
    extra = len(needle) - 1
    return sum(
        raw.count(needle, start, start + window + extra) for start in range(0, len(raw), window)
    )


def check_element_count(count: int, what: str) -> None:
    """Refuse a body that would build more than `MAX_ELEMENTS` values (a memory bomb)."""
    if count > MAX_ELEMENTS:
        raise DecodeError(
            f"{what} with about {count:,} values, more than the limit of {MAX_ELEMENTS:,} "
            "a response may hold"
        )


def check_int_range(value: int) -> int:
    """Ids, revisions and counts are signed 64-bit numbers (SQLite's and PostgreSQL's
    `bigint`); anything larger is no value the service sends, and would overflow later."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise DecodeError(f"integer out of the 64-bit range: {str(value)[:40]}…")
    return value


def parse_int(text: str) -> int:
    if text.isdigit() and text.isascii() and len(text) < 19:  # plain digits: within 64 bits
        return int(text)
    # int() and Decimal() skip surrounding white space themselves.
    if len(text) > MAX_NUMBER_CHARS:
        raise DecodeError(f"integer too long ({len(text)} characters)")
    if not _ascii_number(text):
        raise DecodeError(f"not an integer: {text[:40]!r}")
    try:
        return check_int_range(int(text))
    except ValueError:
        raise DecodeError(f"not an integer: {text[:40]!r}") from None


def parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise DecodeError(f"not a boolean: {text[:40]!r}")


def parse_date(text: str) -> dt.date:
    """ISO date; a full timestamp (`2014-07-31T12:00:00+02:00`) gives the date as written,
    as Rails casts it (clients of the service sent every date that way)."""
    text = text.strip()
    with contextlib.suppress(ValueError):
        return dt.date.fromisoformat(text)
    if len(text) > 10 and text[10] in "Tt":
        with contextlib.suppress(DecodeError):
            return parse_datetime(text).date()
    raise DecodeError(f"not a date (YYYY-MM-DD): {text[:40]!r}")


def parse_datetime(text: str) -> dt.datetime:
    """ISO 8601 datetime; `Z` means UTC and a value without offset is taken as UTC."""
    text = text.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    # Fractions of any length, cut to microseconds as Python 3.11+ does: 3.10's
    # fromisoformat takes exactly 3 or 6 digits.
    text = _FRACTION.sub(lambda m: "." + (m.group(1) + "00000")[:6], text, count=1)
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise DecodeError(f"not a datetime (ISO 8601): {text[:40]!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value


def format_decimal(value: Decimal) -> str:
    """Plain notation (`60.50`, never `6.05E+1`), so Rails reads it back exactly."""
    return format(value, "f")


def format_datetime(value: dt.datetime) -> str:
    return value.isoformat()
