"""The current session (`<user>` document) and the sync list entry."""

from __future__ import annotations

import bisect
import operator
from array import array
from collections.abc import ItemsView, Iterable, Iterator, Mapping
from itertools import islice
from typing import Any, ClassVar

import attrs

from invoicing_async._models.base import Model, extra_field, read_only

__all__ = ["CurrentSession", "SyncEntry", "SyncRevisions"]


@attrs.define(kw_only=True, repr=False)
class CurrentSession(Model):
    """The active user of the session (root element `<user>`)."""

    _repr_fields: ClassVar[tuple[str, ...]] = ("id", "name", "email", "language", "time_zone")

    id: int | None = read_only()
    email: str | None = read_only()
    name: str | None = read_only()
    language: str | None = read_only()
    time_zone: str | None = read_only()
    extra: dict[str, Any] = extra_field()


@attrs.frozen
class SyncEntry:
    """One row of the sync list: an invoice id and its current revision."""

    id: int
    revision: int


class SyncRevisions(Mapping[int, int]):
    """The sync list as {id: revision}, compact: two arrays of 64-bit integers (16 bytes an
    invoice), looked up by binary search."""

    __slots__ = ("_ids", "_revisions", "_sorted")

    def __init__(self, pairs: Iterable[tuple[int, int]] = ()) -> None:
        self._ids = array("q")
        self._revisions = array("q")
        self._sorted = True
        for ident, revision in pairs:
            self.add(ident, revision)

    @classmethod
    def from_arrays(cls, ids: array[int], revisions: array[int]) -> SyncRevisions:
        """The same as adding each pair in turn, from two arrays of 64-bit integers that
        become this mapping's own (the JSON sync list's reader fills them)."""
        made = cls()
        made._ids = ids
        made._revisions = revisions
        made._sorted = all(map(operator.lt, ids, islice(ids, 1, None)))
        return made

    def same_as(self, other: SyncRevisions) -> bool:
        """Whether both hold the same ids at the same revisions (two array comparisons, in
        C: a sync run that finds nothing changed asks this first)."""
        self._settle()
        other._settle()
        return self._ids == other._ids and self._revisions == other._revisions

    def add(self, ident: int, revision: int) -> None:
        ids = self._ids
        if ids and ident <= ids[-1]:
            if ident == ids[-1]:
                # The same id again (a reader that met a member twice): the highest
                # revision, kept in place, so an ordered list stays ordered; sorting a
                # million entries builds a dict of them (~100 MB).
                if revision > self._revisions[-1]:
                    self._revisions[-1] = revision
                return
            self._sorted = False
        ids.append(ident)
        self._revisions.append(revision)

    def _settle(self) -> None:
        """Sort by id and keep the highest revision of an id listed twice (only if needed)."""
        if self._sorted:
            return
        best: dict[int, int] = {}
        for ident, revision in zip(self._ids, self._revisions, strict=True):
            if best.get(ident, revision) <= revision:
                best[ident] = revision
        order = sorted(best)
        self._ids = array("q", order)
        self._revisions = array("q", (best[i] for i in order))
        self._sorted = True

    def _index(self, ident: int) -> int:
        self._settle()
        at = bisect.bisect_left(self._ids, ident)
        if at < len(self._ids) and self._ids[at] == ident:
            return at
        return -1

    def __getitem__(self, ident: int) -> int:
        at = self._index(ident)
        if at < 0:
            raise KeyError(ident)
        return self._revisions[at]

    def __contains__(self, ident: object) -> bool:
        return isinstance(ident, int) and self._index(ident) >= 0

    def __iter__(self) -> Iterator[int]:
        self._settle()
        return iter(self._ids)

    def __len__(self) -> int:
        self._settle()
        return len(self._ids)

    def items(self) -> ItemsView[int, int]:
        self._settle()
        return _PairsView(self)

    def pairs(self) -> Iterator[tuple[int, int]]:
        """(id, revision) by id, straight from the two arrays."""
        self._settle()
        return zip(self._ids, self._revisions, strict=True)

    def __repr__(self) -> str:
        return f"SyncRevisions({len(self)} invoices)"


class _PairsView(ItemsView[int, int]):
    """`items()` straight from the two arrays, without a lookup per id."""

    def __init__(self, revisions: SyncRevisions) -> None:
        super().__init__(revisions)
        self._revisions = revisions

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return self._revisions.pairs()
