"""What a request body may not carry (floats, NaN, naive datetimes, characters XML 1.0
forbids, lone surrogates): found before sending, named by their path in the body."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

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
    if isinstance(value, float):
        yield path, f"is a float ({value!r}): give a Decimal, floats are not exact"
    elif isinstance(value, Decimal) and not value.is_finite():
        yield path, f"is not a finite number ({value})"
    elif isinstance(value, dt.datetime) and value.utcoffset() is None:
        yield path, "is a naive datetime: give one with a time zone (tzinfo)"
    elif isinstance(value, str):
        if _SURROGATE.search(value):
            yield path, "holds a lone surrogate, which no encoding can send"
        elif xml and (found := _XML_FORBIDDEN.search(value)):
            yield path, f"holds {found.group()!r}, a character XML 1.0 does not allow"
