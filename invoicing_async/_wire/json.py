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
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any, TypeGuard

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
    "decode_json",
    "decode_member",
    "encode_document",
    "encode_json",
    "iter_json_array",
    "iter_json_array_text",
    "split_members",
]


def _parse_constant(name: str) -> Any:
    raise DecodeError(f"JSON constant {name} is not a number the service sends")


def _number(text: str) -> Decimal:
    """A JSON number with a fraction or exponent: exact, finite and of sane size."""
    if len(text) < 30 and "e" not in text and "E" not in text:
        return Decimal(text)  # the common case, at C speed
    return parse_decimal(text)


def _decoder(object_hook: Callable[[dict[str, Any]], Any] | None) -> json.JSONDecoder:
    return json.JSONDecoder(
        parse_float=_number,
        # Integers stay C-fast: the interpreter itself refuses ones of over 4300 digits
        # (ValueError in `decode_json`), which bounds the work a hostile body can cause.
        parse_constant=_parse_constant,
        object_hook=object_hook,
    )


#: The decoder of every body without an object hook, made once (it keeps no state).
_DECODER = _decoder(None)


def decode_json(
    body: bytes | str, *, object_hook: Callable[[dict[str, Any]], Any] | None = None
) -> Any:
    """Parse JSON; fractions become exact `Decimal`. Every failure is a `DecodeError`.

    `object_hook` may replace each object as it is parsed (to keep large lists small).
    """
    if len(body) > MAX_ELEMENTS:  # a shorter body cannot hold more values than that
        raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        check_element_count(count_in(raw, b","), "JSON document")
    try:
        decoder = _DECODER if object_hook is None else _decoder(object_hook)
        if _windowed(body):
            return [value for value, _ in _windowed_members(body, decoder)]
        text = body if isinstance(body, str) else _text(body)
        if len(text) > _MEMBERWISE_CHARS and text.lstrip(" \t\n\r")[:1] == "[":
            return _decode_array(text, decoder)
        return decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise DecodeError(f"malformed JSON: {exc.msg}", position=(exc.lineno, exc.colno)) from None
    except UnicodeDecodeError as exc:
        raise DecodeError(f"JSON body is not UTF-8: {exc.reason}") from None
    except RecursionError:
        raise DecodeError("JSON document nested too deeply") from None
    except ValueError as exc:  # int() limits of the interpreter, odd encodings
        raise DecodeError(f"malformed JSON: {exc}") from None


# A list body larger than this is parsed one member at a time: each member is one short C
# call, so a worker thread decoding it lets the event loop's thread in between (one
# `json.loads` of 10,000 invoices holds the interpreter for a third of a second).
_MEMBERWISE_CHARS = 64 * 1024
_SPACE = re.compile(r"[ \t\n\r]*")


_WINDOW = 1 << 20
# A member still incomplete after this much text is no member the service sends: the
# whole-text path takes over (and names what is wrong).
_MAX_CARRY = 8 << 20


def _text(body: bytes) -> str:
    """The body as text, decoded a megabyte at a time (one call over 30 MB holds the
    interpreter for ~20 ms while the event loop's thread waits)."""
    encoding = json.detect_encoding(body)
    window = _WINDOW
    if len(body) <= window:
        return body.decode(encoding)
    decoder = codecs.getincrementaldecoder(encoding)()
    view = memoryview(body)
    parts = [decoder.decode(view[i : i + window]) for i in range(0, len(body), window)]
    parts.append(decoder.decode(b"", final=True))
    return "".join(parts)


def _skip(text: str, index: int) -> int:
    """The index of the first non-blank character at or after `index`."""
    blanks = _SPACE.match(text, index)
    return blanks.end() if blanks is not None else index


def _decode_array(text: str, decoder: json.JSONDecoder) -> list[Any]:
    """A top-level JSON array, member by member (`raw_decode`), as `json.loads` reads it."""
    return list(_array_members(text, decoder))


def _array_members(text: str, decoder: json.JSONDecoder) -> Iterator[Any]:
    for value, _start, _end in _array_spans(text, decoder):
        yield value


def _array_spans(text: str, decoder: json.JSONDecoder) -> Iterator[tuple[Any, int, int]]:
    """Each member of a top-level array with where its text starts and ends."""
    index = _skip(text, _skip(text, 0) + 1)  # past "[" and blanks
    if text.startswith("]", index):
        index += 1
    else:
        while True:
            start = index
            value, index = decoder.raw_decode(text, index)
            yield value, start, index
            index = _skip(text, index)
            mark = text[index : index + 1]
            if mark == ",":
                index = _skip(text, index + 1)
            elif mark == "]":
                index += 1
                break
            else:
                raise json.JSONDecodeError("Expecting ',' delimiter", text, index)
    end = _skip(text, index)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)


def _windowed(body: bytes | str) -> TypeGuard[bytes]:
    """Whether the body is read a window at a time: a top-level array of over a window."""
    return isinstance(body, bytes) and len(body) > _WINDOW and body.lstrip(b" \t\n\r")[:1] == b"["


class _Unsure(Exception):
    """The windowed reader cannot go on alone: the whole-text path decides."""


def _windowed_members(body: bytes, decoder: json.JSONDecoder) -> Iterator[tuple[Any, str]]:
    """Each member of a top-level array with its text, read from the body a megabyte at
    a time: no text of the whole body is ever made (joining 32 MB of decoded text holds
    the interpreter ~45 ms, the event loop's thread included). Anything unusual (a member
    that is not an object or array, malformed text, data after the array) hands over to
    the whole-text path, past the members already given, so errors read as before."""
    handed = 0
    try:
        for member in _windows(body, decoder):
            yield member
            handed += 1
        return
    except _Unsure:
        pass
    try:
        text = _text(body)
    except UnicodeDecodeError as exc:
        raise DecodeError(f"JSON body is not UTF-8: {exc.reason}") from None
    for count, (value, start, end) in enumerate(_array_spans(text, decoder)):
        if count >= handed:
            yield value, text[start:end]


def _windows(body: bytes, decoder: json.JSONDecoder) -> Iterator[tuple[Any, str]]:  # noqa: C901
    incremental = codecs.getincrementaldecoder(json.detect_encoding(body))()
    view = memoryview(body)
    carry, state = "", "open"  # open: expect "[" · first: a member or "]" · member · next
    for offset in range(0, len(body), _WINDOW):
        final = offset + _WINDOW >= len(body)
        try:
            text = carry + incremental.decode(view[offset : offset + _WINDOW], final=final)
        except UnicodeDecodeError:
            raise _Unsure from None
        index = 0
        while True:
            index = _skip(text, index)
            mark = text[index : index + 1]
            if not mark:
                break  # the rest is in the next window
            if state == "open":
                if mark != "[":
                    raise _Unsure
                index, state = index + 1, "first"
            elif state == "next":
                if mark == "]":
                    if text[_skip(text, index + 1) :] or not final:
                        raise _Unsure  # data after the array, or more windows to check
                    return
                if mark != ",":
                    raise _Unsure
                index, state = index + 1, "member"
            elif state == "first" and mark == "]":
                state = "next"
            elif mark not in "{[":
                raise _Unsure  # a scalar may end at a window's edge and still parse
            else:
                try:
                    value, end = decoder.raw_decode(text, index)
                except json.JSONDecodeError:
                    if final:
                        raise _Unsure from None
                    break  # cut by the window's edge (or malformed: _MAX_CARRY decides)
                yield value, text[index:end]
                index, state = end, "next"
        carry = text[index:]
        if len(carry) > _MAX_CARRY:
            raise _Unsure
    raise _Unsure  # the array never closed


def _count_commas(body: bytes) -> int:
    """An upper bound of the values a body holds, counted only when it could matter."""
    return count_in(body, b",") if len(body) > MAX_ELEMENTS else 0


def _member_decoder() -> json.JSONDecoder:
    return json.JSONDecoder(parse_float=_number, parse_constant=_parse_constant)


def _array_text(body: bytes) -> tuple[str, json.JSONDecoder] | None:
    """The body's text and a decoder for it, when the body is a top-level array."""
    check_element_count(_count_commas(body), "JSON document")
    try:
        text = _text(body)
    except UnicodeDecodeError as exc:
        raise DecodeError(f"JSON body is not UTF-8: {exc.reason}") from None
    if text.lstrip(" \t\n\r")[:1] != "[":
        return None
    return text, _member_decoder()


def iter_json_array(body: bytes) -> Iterator[Any] | None:
    """The members of a top-level JSON array, decoded one at a time as they are asked for
    (None when the body is not an array). A failure is a `DecodeError`, raised when met."""
    if _windowed(body):
        check_element_count(_count_commas(body), "JSON document")
        decoder = _member_decoder()
        return _mapped_errors(value for value, _ in _windowed_members(body, decoder))
    found = _array_text(body)
    if found is None:
        return None
    return _mapped_errors(_array_members(*found))


def iter_json_array_text(
    body: bytes, decoder: json.JSONDecoder | None = None
) -> Iterator[tuple[Any, str]] | None:
    """Like `iter_json_array`, with each member's own text as sent (to store as is).
    `decoder` reads the members (by default as `decode_json` does)."""
    if _windowed(body):
        check_element_count(_count_commas(body), "JSON document")
        return _mapped_errors(_windowed_members(body, decoder or _member_decoder()))
    found = _array_text(body)
    if found is None:
        return None
    text, default = found
    spans = _array_spans(text, decoder or default)
    return _mapped_errors((value, text[start:end]) for value, start, end in spans)


def _mapped_errors(members: Iterator[Any]) -> Iterator[Any]:
    try:
        yield from members
    except json.JSONDecodeError as exc:
        raise DecodeError(f"malformed JSON: {exc.msg}", position=(exc.lineno, exc.colno)) from None
    except RecursionError:
        raise DecodeError("JSON document nested too deeply") from None
    except ValueError as exc:
        raise DecodeError(f"malformed JSON: {exc}") from None


# msgspec splits an array of this size in about 3 ms (one C call, holding the
# interpreter); larger bodies take the windowed path above.
_SPLIT_BYTES = 4 << 20
_RAW_MEMBERS = msgspec.json.Decoder(list[msgspec.Raw])
# Numbers with a fraction go through `_number`, as in `decode_json`: exact and bounded.
_MEMBER = msgspec.json.Decoder(float_hook=_number)
#: What `decode_member` raises for a text it does not read as `decode_json` would.
MEMBER_REFUSALS = (msgspec.MsgspecError, DecodeError, RecursionError, ValueError)


def _keep_text(text: str) -> str:
    return text


# Reads a member's syntax only: numbers stay text, so a value out of bounds in one member
# (`1e999`, 5,000 digits) does not stop the reader; each member is judged on its own later.
_SYNTAX_ONLY = json.JSONDecoder(
    parse_float=_keep_text, parse_int=_keep_text, parse_constant=_keep_text
)


def split_members(body: bytes, limit: int) -> list[bytes]:
    """The members of a top-level JSON array as their bytes, as sent, without judging
    their values (the caller reads each member on its own). Refuses, as `DecodeError`, a
    body that is not an array of well-formed JSON, and one of more than `limit` members
    before any member is kept: a large body is read one member at a time and given up
    at member `limit + 1`; a small one (at most `_SPLIT_BYTES`) is split in C."""
    if len(body) <= _SPLIT_BYTES:
        try:
            raws = _RAW_MEMBERS.decode(body)
        except (msgspec.MsgspecError, RecursionError, ValueError):  # ValueError: not UTF-8
            pass  # the reader below names what is wrong
        else:
            _check_members(len(raws), limit)
            return [bytes(raw) for raw in raws]
    members = iter_json_array_text(body, _SYNTAX_ONLY)
    if members is None:
        raise DecodeError("expected a JSON array of members")
    kept: list[bytes] = []
    for _value, text in members:
        _check_members(len(kept) + 1, limit)
        kept.append(text.encode("utf-8", "surrogatepass"))
    return kept


def _check_members(count: int, limit: int) -> None:
    if count > limit:
        raise DecodeError(f"a reply of more than {limit} members, the most it may hold")


def decode_member(raw: bytes) -> Any:
    """One member's text as `decode_json` reads it (fractions as bounded `Decimal`), in
    C. It refuses more than `decode_json` (lone surrogates, integers past 64 bits in some
    places): a refusal, any of `MEMBER_REFUSALS`, means "ask `decode_json`", not "bad"."""
    return _MEMBER.decode(raw)


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        # Strings keep every digit; Rails reads "60.50" into a decimal exactly.
        return format_decimal(value)
    if isinstance(value, dt.datetime):
        return format_datetime(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _decimal_text(value: Any) -> str:
    if value.__class__ is Decimal:
        return format_decimal(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def encode_document(root: str, member: Any) -> bytes:
    """A decoded member as a stored document (`{"invoice": {…}}`), the keys and values as
    decoded, decimals as exact strings; `load_model` reads it back.

    orjson writes it (5x faster than `json.dumps`, whose `default` call per amount and
    timestamp cost an XML sync ~20% of its CPU); what orjson refuses (an integer past 64
    bits in a field the models do not know) goes through `json.dumps`, which writes the
    same bytes for everything else."""
    try:
        return orjson.dumps({root: member}, default=_decimal_text)
    except orjson.JSONEncodeError:
        return json.dumps(
            {root: member}, default=_default, ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8", "surrogatepass")


def encode_json(root: str | None, data: Mapping[str, Any] | list[Any]) -> bytes:
    """Encode `data` wrapped in `root` (`{"invoice": data}`); `root=None` sends it bare."""
    payload = data if root is None else {root: data}
    return json.dumps(payload, default=_default, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8"
    )
