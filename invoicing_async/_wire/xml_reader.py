"""Rails XML decoded straight from pyexpat events, fed in chunks of any size.

One closure per event, over a few local variables: the open element's kind (a scalar
parser, plain, array or nil), its children by name, its text. Nothing is built for
what the result drops (the children of a typed scalar or of a nil element are never
decoded), and a list document can hand its members on as each one closes, so the tree
of the whole list never exists. The values are those xmltodict + the former converter
gave: see `xml.py` for the rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from xml.parsers.expat import ErrorString, ExpatError, ParserCreate

from invoicing_async._wire.scalars import (
    MAX_ELEMENTS,
    check_element_count,
    count_in,
    parse_bool,
    parse_date,
    parse_datetime,
    parse_decimal,
    parse_int,
)
from invoicing_async.errors import DecodeError

__all__ = ["MAX_DEPTH", "ElementCount", "XmlReader", "xml_error_text"]

# Rails documents nest five levels (invoices > invoice > details > detail > field); a
# hundred leaves room for any real extension and refuses a pathological one early.
MAX_DEPTH = 100


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


def _int(text: str) -> int:
    # Shorter than 19 characters, an integer is within 64 bits: no range check needed.
    if len(text) < 19:
        try:
            return int(text)
        except ValueError:
            pass
    return parse_int(text)  # the checks, and the error naming what is wrong


_TYPES: dict[str, Any] = {
    "integer": _int,
    "decimal": parse_decimal,
    # Money is never a float: Rails' `float` values become exact decimals too.
    "float": parse_decimal,
    "double": parse_decimal,
    "boolean": parse_bool,
    "date": parse_date,
    "datetime": parse_datetime,
    "dateTime": parse_datetime,
    "array": ARRAY,
}


def _kind_of(attrs: list[str]) -> Any:
    """The kind an element's attributes give it (ordered `[name, value, …]` pairs)."""
    typ = nil = None
    for i in range(0, len(attrs), 2):
        if attrs[i] == "type":
            typ = attrs[i + 1]
        elif attrs[i] == "nil":
            nil = attrs[i + 1]
    kind = _TYPES.get(typ, PLAIN) if typ is not None else PLAIN
    if kind is ARRAY:
        return NIL if nil == "true" else ARRAY
    if kind is PLAIN and nil == "true":
        return NIL
    return kind  # a typed scalar: its text wins over nil="true"


def _flatten(kids: dict[str, Any], repeated: set[str] | None) -> list[Any]:
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


def _repeat(kids: dict[str, Any], repeated: set[str] | None, name: str, value: Any) -> set[str]:
    """A second element of one name: the values become a list (Rails-style repetition)."""
    if repeated is None:
        repeated = set()
    if name in repeated:
        kids[name].append(value)
    else:
        kids[name] = [kids[name], value]
        repeated.add(name)
    return repeated


def _finish_text(kind: Any, text: Any) -> Any:
    """The value of an element from its kind and text (its children dropped, or none)."""
    if text is not None and text.__class__ is not str:
        text = "".join(text)
    if kind is PLAIN:
        return "" if text is None else text
    if kind is ARRAY:
        return []
    return None if text is None else kind(text)


class ElementCount:
    """The `MAX_ELEMENTS` limit, counted from the bytes as they are fed, before they are
    parsed: a flood of tiny elements is refused before it is built, at no cost per
    element. "<" minus "</" counts every start tag (and comment or processing
    instruction: an upper bound)."""

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


def xml_error_text(exc: ExpatError) -> str:
    return ErrorString(exc.code) if exc.code is not None else str(exc)


class XmlReader:
    """An incremental decoder: `feed(chunk)` bytes as they arrive, then `close()`.

    With `members=True` the document is a list: each child of the root is decoded on its
    own and returned by the `feed` or `close` call that completed it, never attached to
    a tree (`on_root` sees the root name as the first member starts, and may raise).
    Otherwise `close()` leaves the whole document in `value`. `root` is the root name.
    Every failure is a `DecodeError`; the reader is then unusable.
    """

    def __init__(
        self,
        *,
        members: bool = False,
        on_root: Callable[[str], None] | None = None,
        encoding: str | None = None,
    ) -> None:
        self.root: str | None = None
        self.value: Any = None
        self._ready: list[Any] = []
        self._count = ElementCount()
        self._failed_value = False
        self._failed = False
        self._parser = self._build(members, on_root, encoding)

    def feed(self, chunk: bytes | memoryview) -> list[Any]:
        """Parse the next bytes; returns the list members completed by them."""
        self._count.add(chunk)
        self._parse(chunk, False)
        return self._take()

    def close(self) -> list[Any]:
        """The end of the document: returns the last members; `value` is then set."""
        self._parse(b"", True)
        if self._failed_value:
            self._failed = True
            _raise_first_failure(self.value)
        return self._take()

    def _take(self) -> list[Any]:
        ready = self._ready
        if not ready:
            return []
        out = ready.copy()
        ready.clear()
        return out

    def _parse(self, data: bytes | memoryview, final: bool) -> None:
        if self._failed:
            raise DecodeError("XML reader used after a failure")
        try:
            self._parser.Parse(data, final)
        except ExpatError as exc:
            self._failed = True
            raise DecodeError(
                f"malformed XML: {xml_error_text(exc)}", position=(exc.lineno, exc.offset)
            ) from None
        except ValueError as exc:  # an entity declaration
            self._failed = True
            raise DecodeError(f"refused XML: {exc}") from None
        except LookupError as exc:  # an XML declaration naming an encoding Python lacks
            self._failed = True
            raise DecodeError(f"malformed XML: {exc}") from None
        except DecodeError:
            self._failed = True
            raise

    def _build(  # noqa: C901
        self, members: bool, on_root: Callable[[str], None] | None, encoding: str | None
    ) -> Any:
        """The parser and its handlers: closures over the state of the open element."""
        parser = ParserCreate(encoding)
        parser.buffer_text = True
        parser.buffer_size = 1 << 16
        parser.ordered_attributes = True
        stack: list[tuple[Any, Any, Any, Any]] = []
        push, pop = stack.append, stack.pop
        emit = self._ready.append
        types_get = _TYPES.get
        # The innermost open element that has children (TOP before the root): its kind,
        # children by name (None until the first closes), text (None, a str, or a list of
        # pieces) and the names of its repeated children. The elements around it wait on
        # `stack`.
        kind: Any = TOP
        kids: dict[str, Any] | None = None
        text: Any = None
        repeated: set[str] | None = None
        # The open element inside it while it has no child (most elements never have one:
        # they are decoded without touching the stack): its kind (None when there is
        # no such element) and its text.
        leaf: Any = None
        ltext: Any = None
        emitted = False  # members mode: a member was handed on
        failed = False  # a value could not be decoded: see `_Failed`

        def start(name: str, attrs: list[str]) -> None:
            nonlocal kind, kids, text, repeated, leaf, ltext
            if leaf is not None:  # the open element has a child: it waits on the stack
                push((kind, kids, text, repeated))
                if members and kind is TOP:
                    leaf = MEMBERS  # whatever the root's attributes, as before
                kind, kids, text, repeated = leaf, None, ltext, None
                if len(stack) >= MAX_DEPTH:
                    _too_deep()
            if kind is PLAIN or kind is ARRAY:
                if not attrs:
                    leaf = PLAIN
                elif len(attrs) != 2:
                    leaf = _kind_of(attrs)
                elif attrs[0] == "type":
                    leaf = types_get(attrs[1], PLAIN)
                elif attrs[0] == "nil":
                    leaf = NIL if attrs[1] == "true" else PLAIN
                else:
                    leaf = PLAIN
            elif kind is MEMBERS or kind is TOP:
                leaf = _kind_of(attrs)
                if kind is TOP:
                    self.root = name
                elif not emitted and on_root is not None:
                    on_root(self.root or "")
            else:
                leaf = SKIP  # inside a scalar or nil element: dropped, never decoded
            ltext = None

        def end(name: str) -> None:  # noqa: C901
            nonlocal kind, kids, text, repeated, leaf, emitted, failed
            k = leaf
            try:
                if k is not None:  # an element without children: most of them
                    leaf = None
                    if ltext.__class__ is str:
                        value: Any = ltext if k is PLAIN else k(ltext)
                    elif ltext is None:
                        value = (
                            None if k is NIL else "" if k is PLAIN else [] if k is ARRAY else None
                        )
                    else:  # text in pieces
                        joined = "".join(ltext)
                        value = joined if k is PLAIN else k(joined)
                else:  # the element that has children
                    k, own, own_text, own_repeated = kind, kids, text, repeated
                    kind, kids, text, repeated = pop()
                    if k is PLAIN:
                        value = own
                    elif k is ARRAY:
                        value = _flatten(own, own_repeated)  # type: ignore[arg-type]
                    elif k is MEMBERS:
                        value = None
                    else:  # a scalar whose children were dropped
                        value = _finish_text(k, own_text)
            except DecodeError as exc:
                # Raised once the member (or document) is complete, so a malformed
                # document is reported as such, and the first bad value in the order
                # xmltodict's converter met them.
                value = _Failed(exc)
                failed = True
            if kind is PLAIN or kind is ARRAY:
                if kids is None:
                    kids = {name: value}
                elif name in kids:
                    repeated = _repeat(kids, repeated, name, value)
                else:
                    kids[name] = value
            elif kind is MEMBERS:
                if failed:
                    _raise_first_failure(value)
                emitted = True
                emit(value)
            elif kind is TOP:
                self.value = value
                self._failed_value = failed

        def chars(data: str) -> None:
            nonlocal text, ltext
            if leaf is not None:
                if ltext is None:
                    ltext = data
                elif ltext.__class__ is str:  # split by an entity or the buffer: pieces
                    ltext = [ltext, data]  # joined once at the end
                else:
                    ltext.append(data)
            elif kind is PLAIN or kind is ARRAY or kind is MEMBERS:
                return  # between children: dropped
            elif text is None:
                text = data  # a typed scalar's text around children: it wins over them
            elif text.__class__ is str:
                text = [text, data]
            else:
                text.append(data)

        parser.StartElementHandler = start
        parser.EndElementHandler = end
        parser.CharacterDataHandler = chars
        parser.EntityDeclHandler = _refuse_entity
        parser.StartDoctypeDeclHandler = _refuse_doctype
        return parser


class _Failed:
    """In place of a value that could not be decoded, until its member or document is
    complete: the error is raised then (as the converter over xmltodict's tree did)."""

    __slots__ = ("error",)

    def __init__(self, error: DecodeError) -> None:
        self.error = error


def _raise_first_failure(value: Any) -> None:
    """Raise the error of the first `_Failed` in `value`, in the order of its dicts."""
    if value.__class__ is _Failed:
        raise value.error
    if value.__class__ is dict:
        for item in value.values():
            _raise_first_failure(item)
    elif value.__class__ is list:
        for item in value:
            _raise_first_failure(item)


def _too_deep() -> None:
    raise DecodeError(f"XML document nested too deeply (more than {MAX_DEPTH} levels)")


def _refuse_entity(*_args: object) -> None:
    raise ValueError("entities are disabled")


def _refuse_doctype(*_args: object) -> None:
    raise ValueError("entities are disabled: a document type declaration was found")
