"""The XML decoder as it was before pyexpat was driven directly (xmltodict, then a
converter over its tree): the reference the new reader must agree with, value for value
and error for error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from xml.parsers.expat import ErrorString, ExpatError

import xmltodict

from invoicing_async._wire.scalars import (
    parse_bool,
    parse_date,
    parse_datetime,
    parse_decimal,
    parse_int,
)
from invoicing_async.errors import DecodeError

_SCALAR_PARSERS: dict[str, Callable[[str], Any]] = {
    "integer": parse_int,
    "decimal": parse_decimal,
    "float": parse_decimal,
    "double": parse_decimal,
    "boolean": parse_bool,
    "date": parse_date,
    "datetime": parse_datetime,
    "dateTime": parse_datetime,
}


def _parse(body: bytes, **options: Any) -> Any:
    try:
        return xmltodict.parse(body, disable_entities=True, strip_whitespace=False, **options)
    except ExpatError as exc:
        text = ErrorString(exc.code) if exc.code is not None else str(exc)
        raise DecodeError(f"malformed XML: {text}", position=(exc.lineno, exc.offset)) from None
    except ValueError as exc:
        raise DecodeError(f"refused XML: {exc}") from None
    except LookupError as exc:
        raise DecodeError(f"malformed XML: {exc}") from None


def reference_decode_xml(body: bytes) -> tuple[str, Any]:
    ((root, value),) = _parse(body).items()
    return root, _convert(value)


def reference_members(body: bytes) -> tuple[str, list[Any]]:
    """The former `decode_xml_members`: every child of the root, in document order."""
    members: list[Any] = []
    roots: list[str] = []

    def member(path: list[tuple[str, Any]], item: Any) -> bool:
        roots.append(path[0][0])
        members.append(_convert(item))
        return True

    _parse(body, item_depth=2, item_callback=member)
    return (roots[0] if roots else reference_decode_xml(body)[0]), members


def _convert(value: Any) -> Any:
    if value.__class__ is str:
        return value
    if value is None:
        return ""
    if value.__class__ is list:
        return [_convert(v) for v in value]
    typ = value.get("@type")
    if typ is not None:
        parser = _SCALAR_PARSERS.get(typ)
        if parser is not None:
            text = value.get("#text")
            return None if text is None else parser(text)
        if typ == "array":
            return None if value.get("@nil") == "true" else _convert_array(value)
    if value.get("@nil") == "true":
        return None
    children = {k: _convert(v) for k, v in value.items() if k[0] not in "@#"}
    if children:
        return children
    text = value.get("#text")
    return "" if text is None else text


def _convert_array(value: dict[str, Any]) -> list[Any]:
    items: list[Any] = []
    for key, member in value.items():
        if key[0] in "@#":
            continue
        if member.__class__ is list:
            items.extend(_convert(m) for m in member)
        else:
            items.append(_convert(member))
    return items
