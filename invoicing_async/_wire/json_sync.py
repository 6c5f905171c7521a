"""The JSON sync list's fast path: `[{"invoice": {"id": 1, "revision": 2}}, …]` into two
integer arrays, parsed and checked in C by msgspec, a piece at a time (the cost per entry
is the same at any length). The sync list is most of a steady run's work. Any other shape
gives up (None), and the caller's general reader reads it or names the error."""

from __future__ import annotations

from array import array
from typing import Annotated

import msgspec

from invoicing_async._wire.json import array_pieces
from invoicing_async._wire.scalars import INT64_MAX, INT64_MIN

__all__ = ["read_json_sync_pairs"]

_Int64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]


class _Pair(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    id: Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]  # never negative
    revision: _Int64


class _Member(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    invoice: _Pair


_LIST = msgspec.json.Decoder(list[_Member])


def read_json_sync_pairs(body: bytes) -> tuple[array[int], array[int]] | None:
    """(ids, revisions) in the order listed, or None when this is not the usual shape."""
    ids: array[int] = array("q")
    revisions: array[int] = array("q")
    try:
        for members in array_pieces(body, _LIST.decode):
            pairs = [member.invoice for member in members]
            ids.extend([p.id for p in pairs])
            revisions.extend([p.revision for p in pairs])
    except (msgspec.MsgspecError, RecursionError, ValueError):  # ValueError: not UTF-8
        return None
    return ids, revisions
