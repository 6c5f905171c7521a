"""Rails-style XML: `to_xml` documents in, `Hash.from_xml`-readable documents out.

Decoding follows the field notes: the `type` attribute types a scalar (an unknown type
means string), `nil="true"` is None, an empty element is "", and only `type="array"`
makes a list, whatever the number of members. Entity declarations are refused.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any
from xml.parsers.expat import ExpatError

import xmltodict

from invoicing_async._wire.scalars import (
    MAX_ELEMENTS,
    check_element_count,
    count_in,
    format_datetime,
    format_decimal,
    parse_bool,
    parse_date,
    parse_datetime,
    parse_decimal,
    parse_int,
)
from invoicing_async.errors import DecodeError

__all__ = ["decode_xml", "decode_xml_members", "encode_xml", "member_name"]

_SCALAR_PARSERS: dict[str, Callable[[str], Any]] = {
    "integer": parse_int,
    "decimal": parse_decimal,
    # Money is never a float: Rails' `float` values become exact decimals too.
    "float": parse_decimal,
    "double": parse_decimal,
    "boolean": parse_bool,
    "date": parse_date,
    "datetime": parse_datetime,
    "dateTime": parse_datetime,
}

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


def _parse(body: bytes | str, **options: Any) -> Any:
    """xmltodict with entities refused; every parser failure becomes a `DecodeError`."""
    if len(body) > MAX_ELEMENTS:  # a shorter body cannot hold more elements than that
        raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        check_element_count(count_in(raw, b"<") - count_in(raw, b"</"), "XML document")
    try:
        return xmltodict.parse(body, disable_entities=True, strip_whitespace=False, **options)
    except ExpatError as exc:
        raise DecodeError(
            f"malformed XML: {xml_error_text(exc)}", position=(exc.lineno, exc.offset)
        ) from None
    except ValueError as exc:  # xmltodict: "entities are disabled"
        raise DecodeError(f"refused XML: {exc}") from None
    except LookupError as exc:  # an XML declaration naming an encoding Python lacks
        raise DecodeError(f"malformed XML: {exc}") from None
    except RecursionError:
        raise DecodeError("XML document nested too deeply") from None


def decode_xml(body: bytes | str) -> tuple[str, Any]:
    """Parse a document into ``(root name, value)``; every failure is a `DecodeError`."""
    tree = _parse(body)
    if not isinstance(tree, dict) or len(tree) != 1:
        raise DecodeError("XML document without a single root element")
    ((root, value),) = tree.items()
    try:
        return root, _convert(value)
    except RecursionError:
        raise DecodeError("XML document nested too deeply") from None


def decode_xml_members(
    body: bytes | str,
    on_member: Callable[[Any], None],
    on_root: Callable[[str], None] | None = None,
) -> str:
    """Stream a list document: hand each member (decoded like `decode_xml`) to `on_member`.

    The whole tree is never built, so a list of a million members costs only what
    `on_member` keeps. `on_root` sees the root name before the first member (and may
    raise to refuse the document). Returns the root name.
    """
    roots: list[str] = []

    def member(path: list[tuple[str, Any]], item: Any) -> bool:
        if not roots:
            roots.append(path[0][0])
            if on_root is not None:
                on_root(path[0][0])
        on_member(_convert(item))
        return True

    _parse(body, item_depth=2, item_callback=member)
    if roots:
        return roots[0]
    return decode_xml(body)[0]  # no members: the document is tiny


def xml_error_text(exc: ExpatError) -> str:
    from xml.parsers.expat import ErrorString

    return ErrorString(exc.code) if exc.code is not None else str(exc)


def _convert(value: Any) -> Any:
    # The hot loop of decoding: one call per element, so it avoids every needless lookup.
    cls = value.__class__
    if cls is str:
        return value
    if value is None:
        return ""
    if cls is list:
        # Repeated elements without type="array": Rails also reads them as a list.
        return [_convert(v) for v in value]
    typ = value.get("@type")
    if typ is not None:
        parser = _SCALAR_PARSERS.get(typ)
        if parser is not None:
            text = value.get("#text")
            if text is None:
                # nil="true", or an empty typed element, which Rails writes only for nil.
                return None
            return parser(text)
        if typ == "array":
            return None if value.get("@nil") == "true" else _convert_array(value)
    if value.get("@nil") == "true":
        return None
    children = {k: _convert(v) for k, v in value.items() if k[0] != "@" and k[0] != "#"}
    if children:
        return children
    # Untyped (or unknown type) element carrying only text and attributes: a string.
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


def encode_xml(
    root: str, data: Mapping[str, Any] | list[Any] | PlainList, *, pretty: bool = False
) -> bytes:
    """Encode a tree of Python values as a Rails-readable document.

    Scalars get `type` attributes (integer, decimal, boolean, date, datetime), None
    becomes `nil="true"`, lists become `type="array"` collections whose members are
    named by `member_name`. A list given as `data` makes a list document
    (`<invoices type="array">`); a `PlainList` repeats its members without
    `type="array"` (`<errors><error>…</error><error>…</error></errors>`).
    """
    tree: dict[str, Any]
    if isinstance(data, PlainList):
        tree = {root: _node(data, root)}
    elif isinstance(data, list):
        tree = {root: _array_node(root, data)}
    else:
        tree = {root: _node_children(data)}
    text: str = xmltodict.unparse(
        tree, encoding="utf-8", short_empty_elements=True, pretty=pretty, full_document=True
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
