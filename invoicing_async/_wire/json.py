"""JSON as the service speaks it, parsed and written exactly.

Numbers with a fraction become `Decimal` while parsing (never a float); keys are kept
as sent (the models accept underscored and hyphenated names alike). Rails' root
wrapping (`{"invoice": {…}}`) is the models' business: `payloads.unwrap_root`.
"""

from __future__ import annotations

import codecs
import datetime as dt
import json
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any, TypeVar

import msgspec
import orjson

from invoicing_async._wire.scalars import (
    MAX_ELEMENTS,
    check_element_count,
    count_in,
    format_datetime,
    format_decimal,
    parse_decimal,
)
from invoicing_async.errors import DecodeError

__all__ = [
    "array_pieces",
    "decode_json",
    "encode_json",
    "iter_members",
    "json_text",
    "split_members",
]


def _parse_constant(name: str) -> Any:
    raise DecodeError(f"JSON constant {name} is not a number the service sends")


def _number(text: str) -> Decimal:
    """A JSON number with a fraction or exponent: exact, finite and of sane size."""
    if len(text) < 30 and "e" not in text and "E" not in text:
        return Decimal(text)  # the common case, at C speed
    return parse_decimal(text)


# Integers stay C-fast: the interpreter itself refuses ones of over 4300 digits
# (ValueError in `decode_json`), which bounds the work a hostile body can cause.
_STDLIB = json.JSONDecoder(parse_float=_number, parse_constant=_parse_constant)
_MSGSPEC = msgspec.json.Decoder(float_hook=_number)


def decode_json(body: bytes | str) -> Any:
    """Parse JSON; fractions become exact `Decimal`. Every failure is a `DecodeError`.

    Parsed in C by msgspec; a body it refuses is parsed again by the standard library,
    which gives the same values for all msgspec reads, reads what msgspec does not (a
    lone surrogate escape, for the converter to name the field; a byte-order mark) and
    says what is wrong with the rest.
    """
    if len(body) > MAX_ELEMENTS:  # a shorter body cannot hold more values than that
        raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        check_element_count(count_in(raw, b","), "JSON document")
    try:
        return _MSGSPEC.decode(body)
    except (msgspec.MsgspecError, DecodeError, RecursionError, ValueError):
        pass
    try:
        text = body if isinstance(body, str) else body.decode(json.detect_encoding(body))
        return _STDLIB.decode(text)
    except json.JSONDecodeError as exc:
        raise DecodeError(f"malformed JSON: {exc.msg}", position=(exc.lineno, exc.colno)) from None
    except UnicodeDecodeError as exc:
        raise DecodeError(f"JSON body is not UTF-8: {exc.reason}") from None
    except RecursionError:
        raise DecodeError("JSON document nested too deeply") from None
    except ValueError as exc:  # int() limits of the interpreter, odd encodings
        raise DecodeError(f"malformed JSON: {exc}") from None


# A top-level array is decoded a piece of about this size at a time: the decoding thread
# gives up the interpreter in between, and a list never exists whole as small objects.
_PIECE = 1 << 20
_RAW_MEMBERS = msgspec.json.Decoder(list[msgspec.Raw])
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
T = TypeVar("T")


def _raw_members(piece: bytes) -> list[bytes]:
    """The members of an array as their bytes. msgspec refuses a lone surrogate escape
    even where it only skips: each member is then found in a copy with every surrogate
    escape made a space (the same length, so each member is where it was) and cut from
    the bytes as sent; reading that member refuses it later, on its own."""
    try:
        return list(map(bytes, _RAW_MEMBERS.decode(piece)))
    except msgspec.DecodeError:
        plain = _SURROGATE.sub(lambda _: b"\\u0020", piece)
        if plain == piece:
            raise
    members, at = [], 0
    for raw in map(bytes, _RAW_MEMBERS.decode(plain)):
        at = plain.find(raw, at)
        members.append(piece[at : at + len(raw)])
        at += len(raw)
    return members


def array_pieces(body: bytes, decode: Callable[[bytes], list[T]]) -> Iterator[list[T]]:
    """The members of a top-level JSON array, read by `decode` a piece at a time (linear
    in the body, whatever its size). A piece is cut after a `}` that a `,` follows,
    preferring `}},` (the end of a wrapped member): cut inside a member, it does not
    decode, and the next cut is tried, each later one further on. Anything else raises
    msgspec's error (or `ValueError` for text that is not UTF-8)."""
    text = body.removeprefix(codecs.BOM_UTF8).strip(b" \t\n\r")
    if text[:1] != b"[" or text[-1:] != b"]":
        yield decode(body)  # not an array: raises, naming what it is
        return
    start, end, fails = 1, len(text) - 1, 0
    at = start + _PIECE
    while True:
        cut = -1 if at >= end else text.find(b"}},", at, min(at + _PIECE, end)) + 1
        if cut <= 0 and at < end:
            cut = text.find(b"},", at, end)
        if cut <= 0:
            rest = decode(b"[" + text[start:end] + b"]")
            if start > 1 and not rest:
                raise msgspec.DecodeError("a trailing ',' in the array")
            yield rest
            return
        try:
            members = decode(b"[" + text[start : cut + 1] + b"]")
        except (msgspec.DecodeError, RecursionError):
            fails += 1  # cut inside a member: the next cut, or after 8, twice as far
            at = cut + 1 if fails % 8 else start + 2 * (cut - start)
            continue
        yield members
        start, fails = cut + 2, 0
        at = start + _PIECE


def iter_members(body: bytes) -> Iterator[bytes]:
    """The members of a top-level JSON array as their bytes, as sent, without reading
    their values (the caller reads each member on its own). A body that is not an array
    of well-formed JSON is refused (`DecodeError`) when met."""
    if len(body) > MAX_ELEMENTS:
        check_element_count(count_in(body, b","), "JSON document")
    try:
        for piece in array_pieces(body, _raw_members):
            yield from piece
    except (msgspec.DecodeError, RecursionError, ValueError) as exc:
        if body.lstrip(b" \t\n\r")[:1] != b"[":
            raise DecodeError("expected a JSON array of members") from None
        raise DecodeError(f"malformed JSON: {exc}") from None


def split_members(body: bytes, limit: int) -> list[bytes]:
    """`iter_members` as a list, refused (`DecodeError`) at member `limit + 1`, before
    any member is kept beyond it."""
    kept: list[bytes] = []
    for member in iter_members(body):
        if len(kept) >= limit:
            raise DecodeError(f"a reply of more than {limit} members, the most it may hold")
        kept.append(member)
    return kept


def json_text(value: Any) -> str:
    """A decimal, datetime or date as JSON writes it: exact text, ISO 8601."""
    if isinstance(value, Decimal):
        # Strings keep every digit; Rails reads "60.50" into a decimal exactly.
        return format_decimal(value)
    if isinstance(value, dt.datetime):
        return format_datetime(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def encode_json(root: str | None, data: Any) -> bytes:
    """Compact JSON of `data` wrapped in `root` (`{"invoice": data}`; `root=None` sends it
    bare), decimals as exact strings; also how a decoded member is stored, which
    `load_model` reads back.

    orjson writes it (5x faster than `json.dumps`, whose `default` call per amount and
    timestamp cost an XML sync ~20% of its CPU); what orjson refuses (an integer past 64
    bits, a key that is no string, a lone surrogate) goes through `json.dumps`, which
    writes the same bytes for everything else."""
    value = data if root is None else {root: data}
    try:
        return orjson.dumps(value, default=json_text)
    except orjson.JSONEncodeError:
        return json.dumps(
            value, default=json_text, ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8", "surrogatepass")
