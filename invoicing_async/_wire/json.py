"""JSON as the service speaks it, parsed and written exactly.

Numbers with a fraction become `Decimal` while parsing (never a float); keys are kept
as sent (the models accept underscored and hyphenated names alike). Rails' root
wrapping (`{"invoice": {…}}`) is the models' business: `payloads.unwrap_root`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from invoicing_async._wire.scalars import (
    MAX_ELEMENTS,
    check_element_count,
    format_datetime,
    format_decimal,
    parse_decimal,
)
from invoicing_async.errors import DecodeError

__all__ = ["decode_json", "encode_json"]


def _parse_constant(name: str) -> Any:
    raise DecodeError(f"JSON constant {name} is not a number the service sends")


def _number(text: str) -> Decimal:
    """A JSON number with a fraction or exponent: exact, finite and of sane size."""
    if len(text) < 30 and "e" not in text and "E" not in text:
        return Decimal(text)  # the common case, at C speed
    return parse_decimal(text)


def decode_json(
    body: bytes | str, *, object_hook: Callable[[dict[str, Any]], Any] | None = None
) -> Any:
    """Parse JSON; fractions become exact `Decimal`. Every failure is a `DecodeError`.

    `object_hook` may replace each object as it is parsed (to keep large lists small).
    """
    if len(body) > MAX_ELEMENTS:  # a shorter body cannot hold more values than that
        raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        check_element_count(raw.count(b","), "JSON document")
    try:
        return json.loads(
            body,
            parse_float=_number,
            # Integers stay C-fast: the interpreter itself refuses ones of over 4300
            # digits (ValueError below), which bounds the work a hostile body can cause.
            parse_constant=_parse_constant,
            object_hook=object_hook,
        )
    except json.JSONDecodeError as exc:
        raise DecodeError(f"malformed JSON: {exc.msg}", position=(exc.lineno, exc.colno)) from None
    except UnicodeDecodeError as exc:
        raise DecodeError(f"JSON body is not UTF-8: {exc.reason}") from None
    except RecursionError:
        raise DecodeError("JSON document nested too deeply") from None
    except ValueError as exc:  # int() limits of the interpreter, odd encodings
        raise DecodeError(f"malformed JSON: {exc}") from None


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        # Strings keep every digit; Rails reads "60.50" into a decimal exactly.
        return format_decimal(value)
    if isinstance(value, dt.datetime):
        return format_datetime(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def encode_json(root: str | None, data: Mapping[str, Any] | list[Any]) -> bytes:
    """Encode `data` wrapped in `root` (`{"invoice": data}`); `root=None` sends it bare."""
    payload = data if root is None else {root: data}
    return json.dumps(payload, default=_default, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8"
    )
