"""The pieces of `XmlReader`: element kinds, the Rails types, the limits, and what its
handlers call off the hot path (repetition, arrays, deferred errors, refusals)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from invoicing_async._wire.scalars import (
    MAX_DEPTH,
    MAX_ELEMENTS,
    TextCache,
    check_element_count,
    count_in,
    parse_bool,
    parse_date,
    parse_datetime,
    parse_decimal,
    parse_int,
)
from invoicing_async.errors import DecodeError

__all__ = [
    "ARRAY",
    "MAX_DEPTH",
    "MEMBERS",
    "NIL",
    "PLAIN",
    "SKIP",
    "TOP",
    "TYPES",
    "BadMember",
    "ElementCount",
    "Failed",
    "flatten",
    "kept",
    "kind_of",
    "raise_first_failure",
    "refuse_doctype",
    "refuse_entity",
    "repeat",
    "too_deep",
]


def _nil(_text: str) -> None:
    return None


class _Kind:
    """A marker for an element that collects children (plain element, array, list root)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"

    def __call__(self, _text: str) -> list[Any]:
        # Only ARRAY is ever called, for an array without members: empty, whatever its text.
        return []


PLAIN = _Kind("plain")  # children make a dict; without children, its text
ARRAY = _Kind("array")  # type="array": the children in a list, text ignored
MEMBERS = _Kind("members")  # the root of a list read member by member
TOP = _Kind("top")  # above the root element
# Elements whose children are dropped are kinds that are functions of the text.
NIL: Callable[[str], None] = _nil  # nil="true": None whatever it holds
SKIP: Callable[[str], None] = _nil  # inside a dropped element: never decoded


# Amounts, dates and times are parsed once per text (immutable values, reused): the same
# ones recur across a list (a line's timestamps are its invoice's).
_DECIMAL = TextCache(parse_decimal).__getitem__
_DATETIME = TextCache(parse_datetime).__getitem__
TYPES: dict[str, Any] = {
    "integer": parse_int,
    "decimal": _DECIMAL,
    # Money is never a float: Rails' `float` values become exact decimals too.
    "float": _DECIMAL,
    "double": _DECIMAL,
    "boolean": parse_bool,
    "date": TextCache(parse_date).__getitem__,
    "datetime": _DATETIME,
    "dateTime": _DATETIME,
    "array": ARRAY,
}


def kind_of(attrs: list[str]) -> Any:
    """The kind an element's attributes give it (ordered `[name, value, …]` pairs)."""
    typ = nil = None
    for i in range(0, len(attrs), 2):
        if attrs[i] == "type":
            typ = attrs[i + 1]
        elif attrs[i] == "nil":
            nil = attrs[i + 1]
    kind = TYPES.get(typ, PLAIN) if typ is not None else PLAIN
    if kind is ARRAY:
        return NIL if nil == "true" else ARRAY
    if kind is PLAIN and nil == "true":
        return NIL
    return kind  # a typed scalar: its text wins over nil="true"


def flatten(kids: dict[str, Any], repeated: set[str] | None) -> list[Any]:
    """An array's members: grouped by name in order of first appearance, as before."""
    if repeated is None:
        return list(kids.values())
    if len(kids) == 1:
        ((name, only),) = kids.items()
        return only if name in repeated else [only]
    items: list[Any] = []
    for name, value in kids.items():
        if name in repeated:
            items.extend(value)
        else:
            items.append(value)
    return items


def repeat(kids: dict[str, Any], repeated: set[str] | None, name: str, value: Any) -> set[str]:
    """A second element of one name: the values become a list (Rails-style repetition)."""
    if repeated is None:
        repeated = set()
    if name in repeated:
        kids[name].append(value)
    else:
        kids[name] = [kids[name], value]
        repeated.add(name)
    return repeated


class ElementCount:
    """The `MAX_ELEMENTS` limit, counted from the bytes before they are parsed ("<" minus "</":
    an upper bound of the start tags), so a flood of tiny elements is never built."""

    __slots__ = ("_open", "count")

    def __init__(self) -> None:
        self.count = 0
        self._open = False  # the last chunk ended in "<": counted once the next shows "/"

    def add(self, chunk: bytes | memoryview) -> None:
        if not chunk:
            return
        raw = bytes(chunk) if isinstance(chunk, memoryview) else chunk
        count = count_in(raw, b"<") - count_in(raw, b"</")
        if self._open and raw[:1] != b"/":
            count += 1
        self._open = raw[-1:] == b"<"
        if self._open:
            count -= 1
        self.count += count
        if self.count > MAX_ELEMENTS:
            check_element_count(self.count, "XML document")


def kept(text: list[str] | None, texts: list[str]) -> list[str]:
    """A scalar's text pieces so far, with `texts` added (joined once, at its end)."""
    if text is None:
        return texts.copy()
    text.extend(texts)
    return text


class Failed:
    """In place of a value that could not be decoded, until its member or document is
    complete: the error is raised then (as the converter over xmltodict's tree did)."""

    __slots__ = ("error",)

    def __init__(self, error: DecodeError) -> None:
        self.error = error


def raise_first_failure(value: Any) -> None:
    """Raise the error of the first `Failed` in `value`, in the order of its dicts."""
    found = first_failure(value)
    if found is not None:
        raise found[1]


def first_failure(value: Any, path: tuple[str, ...] = ()) -> tuple[str, DecodeError] | None:
    """Where the first `Failed` in `value` is (`details.price`) and its error, or None."""
    if value.__class__ is Failed:
        return ".".join(path), value.error
    items: Any = ()
    if value.__class__ is dict:
        items = value.items()
    elif value.__class__ is list:
        items = ((None, item) for item in value)
    for key, item in items:
        found = first_failure(item, path if key is None else (*path, key))
        if found is not None:
            return found
    return None


class BadMember:
    """A list member holding a value that could not be decoded, handed on in its place: the
    member as far as it was read (for its id), where the bad value is, and why."""

    __slots__ = ("error", "path", "value")

    def __init__(self, value: Any) -> None:
        found = first_failure(value)
        assert found is not None  # only made for a member that holds a `Failed`
        self.value = value
        self.path, self.error = found


def too_deep() -> None:
    raise DecodeError(f"XML document nested too deeply (more than {MAX_DEPTH} levels)")


def refuse_entity(*_args: object) -> None:
    raise ValueError("entities are disabled")


def refuse_doctype(*_args: object) -> None:
    raise ValueError("entities are disabled: a document type declaration was found")
