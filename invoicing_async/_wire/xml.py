"""Rails-style XML: `to_xml` documents in, `Hash.from_xml`-readable documents out.

Decoding follows the field notes: `type` types a scalar (unknown means string),
`nil="true"` is None, an empty element is "", and `type="array"` (or repeated untyped
siblings) makes a list. Declarations are refused. Read by `XmlReader` on pyexpat;
encoded by xmltodict."""

from __future__ import annotations

import datetime as dt
import re
from array import array
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import xmltodict

from invoicing_async._wire.scalars import MAX_ELEMENTS, format_datetime, format_decimal
from invoicing_async._wire.xml_kinds import BadMember
from invoicing_async._wire.xml_reader import XmlReader
from invoicing_async.errors import DecodeError

__all__ = [
    "BadMember",
    "XmlReader",
    "decode_xml",
    "decode_xml_members",
    "encode_xml",
    "member_name",
    "read_xml_sync_pairs",
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


# The sync list as Rails writes it ("~": white space between tags, or none): only these
# tags and at most 18 ASCII digits (within 64 bits), so what this accepts the reader
# above accepts with the same pairs.
_SYNC_HEAD, _SYNC_MEMBER = (
    re.compile(pattern.replace(b"~", rb"[ \t\r\n]*"))
    for pattern in (
        rb'(?:<\?xml version="1\.0"(?: encoding="[Uu][Tt][Ff]-8")?\?>)?~<invoices type="array">',
        rb'~<invoice>~<id type="integer">([0-9]{1,18})</id>'
        rb'~<revision type="integer">([0-9]{1,18})</revision>~</invoice>',
    )
)


def read_xml_sync_pairs(body: bytes) -> tuple[array[int], array[int]] | None:
    """(ids, revisions) of a sync list in the shape Rails writes, read in C with no
    element built; None for any other shape (the reader then reads it or says why not)."""
    head = _SYNC_HEAD.match(body)
    if head is None:
        return None
    ids: array[int] = array("q")
    revisions: array[int] = array("q")
    at = head.end()
    for member in _SYNC_MEMBER.finditer(body, at):
        if member.start() != at:
            return None
        ids.append(int(member[1]))
        revisions.append(int(member[2]))
        at = member.end()
    if body[at:].strip(b" \t\r\n") != b"</invoices>" or 3 * len(ids) + 1 > MAX_ELEMENTS:
        return None
    return ids, revisions


# Bodies are fed a slice at a time: the elements of each are counted before it is parsed,
# and a list's members are handed on per slice instead of all at the end.
_SLICE = 256 * 1024


def encode_xml(root: str, data: Mapping[str, Any] | list[Any] | PlainList) -> bytes:
    """Encode a tree of Python values as a Rails-readable document: typed scalars, None as
    `nil="true"`, lists as `type="array"` collections of `member_name` members (a `PlainList`
    without `type="array"`)."""
    tree: dict[str, Any]
    if isinstance(data, PlainList):
        tree = {root: _node(data, root)}
    elif isinstance(data, list):
        tree = {root: _array_node(root, data)}
    else:
        tree = {root: _node_children(data)}
    text: str = xmltodict.unparse(
        tree, encoding="utf-8", short_empty_elements=True, full_document=True
    )
    # A parser turns a literal "\r\n" into "\n"; as a character reference it survives.
    return text.replace("\r", "&#13;").encode("utf-8")


def _array_node(name: str, items: list[Any]) -> dict[str, Any]:
    node: dict[str, Any] = {"@type": "array"}
    if items:
        node[member_name(name)] = [_node(item, name) for item in items]
    return node


def _node_children(data: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _node(value, key) for key, value in data.items()}


def _node(value: Any, name: str) -> Any:
    # bool before int: bool is an int subclass.
    if value is None:
        return {"@nil": "true"}
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return {"@type": "boolean", "#text": "true" if value else "false"}
    if isinstance(value, int):
        return {"@type": "integer", "#text": str(value)}
    if isinstance(value, Decimal):
        return {"@type": "decimal", "#text": format_decimal(value)}
    if isinstance(value, float):
        return {"@type": "float", "#text": repr(value)}
    if isinstance(value, dt.datetime):
        return {"@type": "dateTime", "#text": format_datetime(value)}
    if isinstance(value, dt.date):
        return {"@type": "date", "#text": value.isoformat()}
    if isinstance(value, Mapping):
        return _node_children(value)
    if isinstance(value, (list, tuple)):
        return _array_node(name, list(value))
    if isinstance(value, PlainList):
        return {value.member: [_node(v, value.member) for v in value.items]}
    raise TypeError(f"cannot encode {type(value).__name__} as XML ({name})")


class PlainList:
    """Repeated elements without `type="array"`, as the sync-fetch body wants them."""

    __slots__ = ("items", "member")

    def __init__(self, member: str, items: list[Any]) -> None:
        self.member = member
        self.items = items
