"""Rails XML decoded straight from pyexpat events, fed in chunks of any size.

A closure per element start and end over a few locals; text goes straight into a list,
an element without children never touches the stack, nothing is built for what the
result drops, and a list hands its members on as each closes. Rules: see `xml.py`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from xml.parsers.expat import ErrorString, ExpatError, ParserCreate

from invoicing_async._wire.xml_kinds import (
    ARRAY,
    MAX_DEPTH,
    MEMBERS,
    NIL,
    PLAIN,
    SKIP,
    TOP,
    TYPES,
    BadMember,
    ElementCount,
    Failed,
    flatten,
    kept,
    kind_of,
    raise_first_failure,
    refuse_doctype,
    refuse_entity,
    repeat,
    too_deep,
)
from invoicing_async.errors import DecodeError

__all__ = ["MAX_DEPTH", "ElementCount", "XmlReader", "xml_error_text"]


def xml_error_text(exc: ExpatError) -> str:
    """expat's words for a failure, without the position (`DecodeError` carries that)."""
    return ErrorString(exc.code) if exc.code is not None else str(exc)


class XmlReader:
    """An incremental decoder: `feed(chunk)` bytes as they arrive, then `close()`.

    With `members=True` each child of the root is decoded on its own and returned by the
    call that completed it (`on_root` sees the root name first, and may raise); otherwise
    `close()` leaves the document in `value`. Every failure is a `DecodeError`. With
    `judge_members`, a member with a bad value or nested deeper than `MAX_DEPTH` is handed
    on as a `BadMember` instead (unjudged, it refuses the document)."""

    def __init__(
        self,
        *,
        members: bool = False,
        on_root: Callable[[str], None] | None = None,
        encoding: str | None = None,
        judge_members: bool = False,
    ) -> None:
        self.root: str | None = None
        self.value: Any = None
        self._ready: list[Any] = []
        self._count = ElementCount()
        self._failed_value = False
        self._failed = False
        self._judge_members = judge_members
        self._parser = self._build(members, on_root, encoding)

    def feed(self, chunk: bytes | memoryview) -> list[Any]:
        """Parse the next bytes; returns the list members completed by them."""
        if not self._failed:
            try:
                self._count.add(chunk)
            except DecodeError:
                self._failed = True
                raise
        self._parse(chunk, False)
        return self._take()

    def close(self) -> list[Any]:
        """The end of the document: returns the last members; `value` is then set."""
        self._parse(b"", True)
        if self._failed_value:
            self._failed = True
            raise_first_failure(self.value)
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
        except ValueError as exc:  # a document type or entity declaration
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
        parser.ordered_attributes = True
        stack: list[tuple[Any, Any, Any, Any]] = []
        push, pop = stack.append, stack.pop
        emit = self._ready.append
        types_get = TYPES.get
        # Text goes straight into `texts`; each start and end takes it as the text of the element
        # it belongs to, or drops it.
        texts: list[str] = []
        clear = texts.clear
        # The innermost open element with children (TOP before the root): its kind, children by
        # name, its own text and its repeated children's names; those around it wait on `stack`.
        kind: Any = TOP
        kids: dict[str, Any] | None = None
        text: list[str] | None = None
        repeated: set[str] | None = None
        # The open element inside it while it has no child: its kind, or None.
        leaf: Any = None
        emitted = False  # members mode: a member was handed on
        judge = self._judge_members
        failed = False  # a value could not be decoded: see `Failed`

        def start(name: str, attrs: list[str]) -> None:  # noqa: C901
            nonlocal kind, kids, text, repeated, leaf
            if leaf is not None:  # the open element has a child: it waits on the stack
                push((kind, kids, text, repeated))
                if members and kind is TOP:
                    leaf = MEMBERS  # whatever the root's attributes, as before
                kind, kids, text, repeated = leaf, None, None, None
                if len(stack) >= MAX_DEPTH:
                    overflow()
                    return
            if texts:  # the open element's text before this child
                if not (kind is PLAIN or kind is ARRAY or kind is MEMBERS or kind is TOP):
                    text = kept(text, texts)  # a scalar's: it wins over its children
                clear()
            if kind is PLAIN or kind is ARRAY:
                if not attrs:
                    leaf = PLAIN
                else:
                    try:
                        key, value = attrs  # one attribute: the usual type or nil
                    except ValueError:
                        leaf = kind_of(attrs)
                    else:
                        if key == "type":
                            leaf = types_get(value, PLAIN)
                        elif key == "nil":
                            leaf = NIL if value == "true" else PLAIN
                        else:
                            leaf = PLAIN
            elif kind is MEMBERS or kind is TOP:
                leaf = kind_of(attrs) if attrs else PLAIN
                if kind is TOP:
                    self.root = name
                elif not emitted and on_root is not None:
                    on_root(self.root or "")
            else:
                leaf = SKIP  # inside a scalar or nil element: dropped, never decoded

        # A judged member nested deeper than `MAX_DEPTH`: its deep field is skipped (counted,
        # never built) and stands as a `Failed`; the member is read on for its id.
        skipped = 0  # elements open in the field being skipped

        def overflow() -> None:
            nonlocal kind, kids, text, repeated, leaf, skipped
            if not (members and judge):
                too_deep()
            clear()
            # stack[2] is the member's state: below it are its field, …, the new element.
            skipped = len(stack) - 1
            kind, kids, text, repeated = stack[2]
            del stack[2:]
            leaf = None
            parser.StartElementHandler = skip_start
            parser.EndElementHandler = skip_end
            parser.CharacterDataHandler = None

        def skip_start(_name: str, _attrs: list[str]) -> None:
            nonlocal skipped
            skipped += 1

        def skip_end(name: str) -> None:
            nonlocal kids, repeated, skipped, failed
            skipped -= 1
            if skipped:
                return
            parser.StartElementHandler = start
            parser.EndElementHandler = end
            parser.CharacterDataHandler = texts.append
            if kind is PLAIN or kind is ARRAY:  # else the member's children are dropped
                value = Failed(DecodeError(f"nested more than {MAX_DEPTH} levels deep"))
                failed = True
                if kids is None:
                    kids = {name: value}
                elif name in kids:
                    repeated = repeat(kids, repeated, name, value)
                else:
                    kids[name] = value

        def end(name: str) -> None:  # noqa: C901
            nonlocal kind, kids, text, repeated, leaf, emitted, failed
            k = leaf
            try:
                if k is not None:  # an element without children: most of them
                    leaf = None
                    if texts:
                        try:
                            (own,) = texts
                        except ValueError:  # split by the buffer or a feed
                            own = "".join(texts)
                        clear()
                        value: Any = own if k is PLAIN else k(own)
                    else:
                        value = (
                            None if k is NIL else "" if k is PLAIN else [] if k is ARRAY else None
                        )
                else:  # the element that has children
                    k, own_kids, own_text, own_repeated = kind, kids, text, repeated
                    kind, kids, text, repeated = pop()
                    if texts:  # its text after the last child
                        if not (k is PLAIN or k is ARRAY or k is MEMBERS):
                            own_text = kept(own_text, texts)
                        clear()
                    if k is PLAIN:
                        value = own_kids
                    elif k is ARRAY:
                        value = flatten(own_kids, own_repeated)  # type: ignore[arg-type]
                    elif k is MEMBERS or own_text is None:
                        value = None
                    else:
                        value = k("".join(own_text))
            except DecodeError as exc:
                # Raised once the member (or document) is complete, so a malformed
                # document is reported as such, and the first bad value in the order
                # xmltodict's converter met them.
                value = Failed(exc)
                failed = True
            if kind is PLAIN or kind is ARRAY:
                if kids is None:
                    kids = {name: value}
                elif name in kids:
                    repeated = repeat(kids, repeated, name, value)
                else:
                    kids[name] = value
            elif kind is MEMBERS:
                if failed:
                    if not judge:
                        raise_first_failure(value)
                    value, failed = BadMember(value), False
                emitted = True
                emit(value)
            elif kind is TOP:
                self.value = value
                self._failed_value = failed

        parser.StartElementHandler = start
        parser.EndElementHandler = end
        parser.CharacterDataHandler = texts.append
        parser.EntityDeclHandler = refuse_entity
        parser.StartDoctypeDeclHandler = refuse_doctype
        return parser
