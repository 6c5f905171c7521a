"""Rails-style XML: `to_xml` documents in, `Hash.from_xml`-readable documents out.

Decoding follows the field notes: `type` types a scalar (unknown means string),
`nil="true"` is None, an empty element is "", and `type="array"` (or repeated untyped
siblings) makes a list. Declarations are refused. Read by `XmlReader` on pyexpat;
written by `encode_xml` (the characters xmltodict wrote, checked in the tests)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from invoicing_async._wire.scalars import format_datetime, format_decimal
from invoicing_async._wire.xml_kinds import BadMember
from invoicing_async._wire.xml_reader import XmlReader
from invoicing_async.errors import DecodeError

__all__ = [
    "XML_DECLARATION",
    "BadMember",
    "XmlReader",
    "decode_xml",
    "decode_xml_members",
    "encode_xml",
    "member_name",
    "xml_element",
]

# Collection names whose members are not the plain singular.
_MEMBER_NAMES = {
    "details-attributes": "detail",
    "details_attributes": "detail",
    "history": "history",
    "ids": "id",
}


def member_name(collection: str) -> str:
    """The element name of one member of a `type="array"` collection, as Rails writes it."""
    special = _MEMBER_NAMES.get(collection)
    if special is not None:
        return special
    if collection.endswith("ies"):
        return collection[:-3] + "y"
    if collection.endswith("s") and not collection.endswith("ss"):
        return collection[:-1]
    return collection


def _raw(body: bytes | str) -> tuple[bytes, str | None]:
    """The bytes to parse and the encoding that overrides the document's declaration."""
    if isinstance(body, str):
        try:
            return body.encode("utf-8"), "utf-8"
        except UnicodeEncodeError as exc:  # a lone surrogate
            raise DecodeError(f"refused XML: {exc}") from None
    return body, None


def decode_xml(body: bytes | str) -> tuple[str, Any]:
    """Parse a document into ``(root name, value)``; every failure is a `DecodeError`."""
    raw, encoding = _raw(body)
    reader = XmlReader(encoding=encoding)
    view = memoryview(raw)
    for start in range(0, len(raw), _SLICE):
        reader.feed(view[start : start + _SLICE])
    reader.close()
    if reader.root is None:
        raise DecodeError("XML document without a single root element")
    return reader.root, reader.value


def decode_xml_members(
    body: bytes | str,
    on_member: Callable[[Any], None],
    on_root: Callable[[str], None] | None = None,
    *,
    judge_members: bool = False,
) -> str:
    """Stream a list document: hand each member (decoded like `decode_xml`) to `on_member`,
    never building the whole tree; the root name. `on_root` and `judge_members` as in
    `XmlReader`."""

    raw, encoding = _raw(body)
    reader = XmlReader(
        members=True, on_root=on_root, encoding=encoding, judge_members=judge_members
    )
    view = memoryview(raw)
    for start in range(0, len(raw), _SLICE):
        for member in reader.feed(view[start : start + _SLICE]):
            on_member(member)
    for member in reader.close():
        on_member(member)
    if reader.root is None:
        raise DecodeError("XML document without a single root element")
    return reader.root


# Bodies are fed a slice at a time: the elements of each are counted before it is parsed,
# and a list's members are handed on per slice instead of all at the end.
_SLICE = 256 * 1024


XML_DECLARATION = '<?xml version="1.0" encoding="utf-8"?>\n'
_BAD_NAME_CHARS = frozenset("<>/\"'=?!@#&")
_good_names: set[str] = set()


def encode_xml(root: str, data: Mapping[str, Any] | list[Any] | PlainList) -> bytes:
    """Encode a tree of Python values as a Rails-readable document: typed scalars, None as
    `nil="true"`, lists as `type="array"` collections of `member_name` members (a `PlainList`
    without `type="array"`)."""
    return (XML_DECLARATION + xml_element(root, data)).encode("utf-8")


def xml_element(root: str, data: Mapping[str, Any] | list[Any] | PlainList) -> str:
    """`data` as the element `root`, as `encode_xml` writes it without the declaration (a
    list member, for the fake service)."""
    out: list[str] = []
    _element(root, data, root, out)
    # A parser turns a literal "\r\n" into "\n"; as a character reference it survives.
    return "".join(out).replace("\r", "&#13;")


def _check_name(name: str) -> None:
    if name in _good_names:
        return
    if not name or any(c in _BAD_NAME_CHARS or c.isspace() for c in name):
        raise ValueError(f"not an XML element name: {name!r}")
    _good_names.add(name)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def _element(tag: str, value: Any, name: str, out: list[str]) -> None:
    """One element `tag` holding `value`; `name` names the members of a list in it."""
    _check_name(tag)
    if value is None:
        out.append(f'<{tag} nil="true"/>')
    elif isinstance(value, str):
        out.append(f"<{tag}>{_escape(value)}</{tag}>" if value else f"<{tag}/>")
    elif isinstance(value, Mapping):
        out.append(f"<{tag}>" if value else f"<{tag}/>")
        for key, item in value.items():
            _element(str(key), item, str(key), out)
        if value:
            out.append(f"</{tag}>")
    elif isinstance(value, (list, tuple)):
        out.append(f'<{tag} type="array">' if value else f'<{tag} type="array"/>')
        member = member_name(name)
        for item in value:
            _element(member, item, name, out)
        if value:
            out.append(f"</{tag}>")
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


class PlainList:
    """Repeated elements without `type="array"`, as the sync-fetch body wants them."""

    __slots__ = ("items", "member")

    def __init__(self, member: str, items: list[Any]) -> None:
        self.member = member
        self.items = items
