"""A fast writer of the elements `encode_xml` writes, for the fake service's documents:
the same characters (checked in the tests), an order of magnitude faster; odd names fall
back to `encode_xml`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from invoicing_async._wire.scalars import format_datetime, format_decimal
from invoicing_async._wire.xml import PlainList, encode_xml, member_name

__all__ = ["XML_DECLARATION", "xml_element"]

XML_DECLARATION = '<?xml version="1.0" encoding="utf-8"?>\n'
_BAD_NAME_CHARS = frozenset("<>/\"'=?!@#&")
_good_names: set[str] = set()


class _Unusual(Exception):
    """A name this writer does not handle as `encode_xml` would: fall back to it."""


def xml_element(root: str, data: Mapping[str, Any]) -> str:
    """`data` as the element `root`, exactly as `encode_xml` writes it (no declaration)."""
    out: list[str] = []
    try:
        _element(root, data, root, out)
    except _Unusual:
        return encode_xml(root, data).decode("utf-8")[len(XML_DECLARATION) :]
    return "".join(out).replace("\r", "&#13;")


def _check(name: str) -> None:
    if name in _good_names:
        return
    if not name or any(c in _BAD_NAME_CHARS or c.isspace() for c in name):
        raise _Unusual(name)
    _good_names.add(name)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def _element(tag: str, value: Any, name: str, out: list[str]) -> None:
    """One element as `_node(value, name)` under `tag` makes it (see `_wire.xml`)."""
    _check(tag)
    if value is None:
        out.append(f'<{tag} nil="true"/>')
    elif isinstance(value, str):
        out.append(f"<{tag}>{_escape(value)}</{tag}>" if value else f"<{tag}/>")
    elif isinstance(value, Mapping):
        _mapping(tag, value, out)
    elif isinstance(value, (list, tuple)):
        _array(tag, value, name, out)
    elif isinstance(value, PlainList):
        out.append(f"<{tag}>" if value.items else f"<{tag}/>")
        for item in value.items:
            _element(value.member, item, value.member, out)
        if value.items:
            out.append(f"</{tag}>")
    else:
        kind, text = _scalar(value, name)
        text = _escape(text)
        out.append(f'<{tag} type="{kind}">{text}</{tag}>' if text else f'<{tag} type="{kind}"/>')


def _mapping(tag: str, value: Mapping[Any, Any], out: list[str]) -> None:
    if not value:
        out.append(f"<{tag}/>")
        return
    out.append(f"<{tag}>")
    for key, item in value.items():
        if not isinstance(key, str):
            raise _Unusual(repr(key))
        _element(key, item, key, out)
    out.append(f"</{tag}>")


def _array(tag: str, value: list[Any] | tuple[Any, ...], name: str, out: list[str]) -> None:
    if not value:
        out.append(f'<{tag} type="array"/>')
        return
    out.append(f'<{tag} type="array">')
    member = member_name(name)
    for item in value:
        _element(member, item, name, out)
    out.append(f"</{tag}>")


def _scalar(value: Any, name: str) -> tuple[str, str]:
    """(type attribute, text) of a typed scalar; bool before int, datetime before date."""
    if isinstance(value, bool):
        return "boolean", "true" if value else "false"
    if isinstance(value, int):
        return "integer", str(value)
    if isinstance(value, Decimal):
        return "decimal", format_decimal(value)
    if isinstance(value, float):
        return "float", repr(value)
    if isinstance(value, dt.datetime):
        return "dateTime", format_datetime(value)
    if isinstance(value, dt.date):
        return "date", value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__} as XML ({name})")
