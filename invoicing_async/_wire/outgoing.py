"""What a request body may not carry (floats, numbers beyond the decoders' bounds, naive
datetimes, characters XML 1.0 forbids, lone surrogates): found before sending, named by
their path in the body."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from invoicing_async._wire.scalars import INT64_MAX, INT64_MIN, decimal_out_of_bounds

__all__ = ["problems"]

# Characters XML 1.0 does not allow (tab, newline and carriage return are allowed).
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def problems(value: Any, *, xml: bool, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, what is wrong) for every value of the tree that cannot be sent as it is."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from problems(item, xml=xml, path=f"{path}.{key}" if path else str(key))
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from problems(item, xml=xml, path=f"{path}.{index}")
        return
    why = _scalar_problem(value, xml=xml)
    if why is not None:
        yield path, why


def _scalar_problem(value: Any, *, xml: bool) -> str | None:
    if isinstance(value, float):
        return f"is a float ({value!r}): give a Decimal, floats are not exact"
    if isinstance(value, Decimal):
        return decimal_out_of_bounds(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return None if INT64_MIN <= value <= INT64_MAX else "integer out of the 64-bit range"
    if isinstance(value, dt.datetime) and value.utcoffset() is None:
        return "is a naive datetime: give one with a time zone (tzinfo)"
    if isinstance(value, str):
        if _SURROGATE.search(value):
            return "holds a lone surrogate, which no encoding can send"
        if xml and (found := _XML_FORBIDDEN.search(value)):
            return f"holds {found.group()!r}, a character XML 1.0 does not allow"
    return None
