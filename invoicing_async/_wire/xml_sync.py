"""The sync list's fast path: `<invoice><id type="integer">…</id><revision type="integer">…`
into two integer arrays, with one small handler and C for the rest.

Only element starts run Python, to classify (a member, or a typed-integer leaf); texts and
end tags go straight into one list, and the shape is checked afterwards with slices and
counts. Anything else gives up and the caller decodes the body with `XmlReader`. (An XML
name never starts with a digit, so a digits-only entry is a text; buffered text arrives in
one piece between two tags.)"""

from __future__ import annotations

from array import array
from typing import Any
from xml.parsers.expat import ParserCreate

from invoicing_async._wire.scalars import MAX_ELEMENTS

__all__ = ["read_sync_pairs"]

_MEMBER = object()  # the start of an element without attributes
_LEAF = object()  # the start of a `type="integer"` element
_BLOCK = 8  # one member: start, leaf start, text, end, leaf start, text, end, end
_SLICE = 1 << 20


class _GiveUp(Exception):
    """Not the usual shape: the general reader decides."""


def read_sync_pairs(body: bytes) -> tuple[str, array[int], array[int]] | None:
    """(root name, ids, revisions) in document order, or None to say "decode it in full"."""
    try:
        return _read(body)
    except Exception:  # any surprise, even a refused document: the general path decides
        return None


def _read(body: bytes) -> tuple[str, array[int], array[int]]:
    parser = ParserCreate()
    parser.buffer_text = True
    parser.ordered_attributes = True
    events: list[Any] = []
    add = events.append
    integer = ["type", "integer"]
    roots: list[str] = []

    def start(_name: str, attrs: list[str]) -> None:
        if not attrs:
            add(_MEMBER)
        elif attrs == integer:
            add(_LEAF)
        else:
            raise _GiveUp

    def start_root(name: str, attrs: list[str]) -> None:
        if attrs and attrs != ["type", "array"]:
            raise _GiveUp
        roots.append(name)
        parser.StartElementHandler = start

    def refuse(*_args: Any) -> None:
        raise _GiveUp

    parser.StartElementHandler = start_root
    parser.EndElementHandler = add
    parser.CharacterDataHandler = add
    # Nothing but elements: the element count is known from the members at the end.
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.CommentHandler = refuse
    parser.ProcessingInstructionHandler = refuse
    parser.StartCdataSectionHandler = refuse
    # Fed in slices that end just after a ">", so that no text is split in two (a Parse
    # call's end flushes its text), and read a slice at a time: a million members never
    # exist as events, only as the two arrays (16 bytes a member).
    ids: array[int] = array("q")
    revisions: array[int] = array("q")
    pending = events
    at = 0
    while at < len(body):
        cut = body.rfind(b">", at, at + _SLICE) + 1 or at + _SLICE
        parser.Parse(body[at:cut], False)
        at = cut
        pending = _take_pairs(pending, ids, revisions)
        if 3 * len(ids) + 2 > MAX_ELEMENTS:
            raise _GiveUp  # the general path refuses it, naming the limit
        parser.CharacterDataHandler = parser.EndElementHandler = add = pending.append
    parser.Parse(b"", True)
    del pending[-1]  # the root's end
    if _take_pairs(pending, ids, revisions):
        raise _GiveUp  # not whole members
    return roots[0], ids, revisions


def _take_pairs(events: list[Any], ids: array[int], revisions: array[int]) -> list[Any]:
    """Move the pairs of the whole members at the start of `events` into the arrays;
    returns what is left (a member not yet closed). Raises `_GiveUp` for another shape."""
    whole = len(events) // _BLOCK * _BLOCK
    pairs = _pairs(events[:whole])
    if pairs is None:  # white space between the tags (an indented document): dropped
        events = [e for e in events if e.__class__ is not str or not e.isspace()]
        whole = len(events) // _BLOCK * _BLOCK
        pairs = _pairs(events[:whole])
        if pairs is None:
            raise _GiveUp
    ids.extend(pairs[0])
    revisions.extend(pairs[1])
    return events[whole:]


def _pairs(events: list[Any]) -> tuple[array[int], array[int]] | None:
    members, rest = divmod(len(events), _BLOCK)
    if not events:
        return array("q"), array("q")
    if rest or (
        events[0::_BLOCK].count(_MEMBER) != members
        or events[1::_BLOCK].count(_LEAF) != members
        or events[4::_BLOCK].count(_LEAF) != members
        or events[3::_BLOCK].count("id") != members
        or events[6::_BLOCK].count("revision") != members
    ):
        return None
    "".join(events[7::_BLOCK])  # the members' ends: a start there is a TypeError
    ids = events[2::_BLOCK]
    revisions = events[5::_BLOCK]
    for texts in (ids, revisions):
        digits = "".join(texts)  # TypeError for a start: give up
        if not (digits.isascii() and digits.isdigit()):
            return None
    # Past 64 bits, the array raises OverflowError: give up.
    return array("q", map(int, ids)), array("q", map(int, revisions))
