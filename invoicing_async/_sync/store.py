"""What the sync engine needs from a place that keeps invoices: the `Store` protocol,
and the revision rule every store applies."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Literal, Protocol, runtime_checkable

import attrs

from invoicing_async._models.documents import load_model
from invoicing_async._models.stored import InvoiceDocument
from invoicing_async.errors import DecodeError
from invoicing_async.models import Invoice

__all__ = [
    "BatchResult",
    "PendingEntry",
    "Store",
    "WriteOutcome",
    "read_stored",
    "write_outcome",
]

logger = logging.getLogger("invoicing_async.sync")

#: What writing one fetched invoice does to a store's copy.
WriteOutcome = Literal["created", "updated", "stale"]


def write_outcome(fetched: int, stored: int | None, *, deleted: bool = False) -> WriteOutcome:
    """The revision rule: whether a fetched invoice (at revision `fetched`) is written over
    the store's copy (at `stored`, None when there is none; `deleted`: a tombstone).

    An older revision never overwrites; an equal revision does, as revisions are whole
    seconds and a later fetch of the same second may hold a later change. A tombstoned
    invoice fetched again is created anew. `MemoryStore` and `SQLiteStore` call this;
    `PostgresStore` says the same in SQL (`UPSERT_BATCH`), and a test holds them equal.
    """
    if stored is None or deleted:
        return "created"
    return "updated" if fetched >= stored else "stale"


def read_stored(rows: Iterable[tuple[int, bytes]], *, wanted: int | None = None) -> list[Invoice]:
    """Stored documents (id, document) read back as models. One that cannot be read (a
    store written by an older version, a hand-edited row) is skipped with a warning, so
    it never fails the others; when it is the one `wanted` (`get`), `DecodeError`
    names it."""
    invoices: list[Invoice] = []
    for ident, document in rows:
        try:
            invoices.append(load_model(bytes(document), "json", Invoice))
        except (DecodeError, RecursionError) as exc:
            if ident == wanted:
                raise DecodeError(f"stored invoice {ident} cannot be read: {exc}") from None
            logger.warning("stored invoice %d cannot be read, skipped: %s", ident, exc)
    return invoices


@attrs.frozen
class BatchResult:
    """What writing one fetched batch did (`Store.apply_documents`): the ids created,
    updated, and left alone as stale, as `write_outcome` decided for each."""

    created: list[int]
    updated: list[int]
    stale: list[int]  # fetched revision older than the stored one: not written


@attrs.frozen
class PendingEntry:
    """An id the engine has planned to fetch, as a store keeps it between runs (the plan
    survives a crash): its listed revision, fetch attempts so far, and whether (and since
    when) it is quarantined."""

    id: int
    revision: int
    attempts: int = 0
    quarantined: bool = False
    since: float = 0.0  # when it was quarantined (Unix time)


@runtime_checkable
class Store(Protocol):
    """A local copy of an account's invoices, with their revisions and the pending plan:
    what `SyncEngine` writes to. Implement it to keep invoices elsewhere.

    Every method that writes commits before it returns: a batch (invoices and their
    revisions) in one transaction, so a crash leaves either all of it or none.
    """

    async def revisions(self) -> Mapping[int, int]:
        """Revision of every live (not deleted) invoice, by id.

        A mapping, not necessarily a dict: a large store returns the compact
        `SyncRevisions` (two arrays of 64-bit integers) instead of a million-entry dict.
        """
        ...

    async def get(self, invoice_id: int) -> Invoice | None:
        """The stored invoice, or None when unknown or deleted."""
        ...

    def iter_invoices(self) -> AsyncIterator[Invoice]:
        """Every live invoice, by id, as an async iterator (for exports and pandas)."""
        ...

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        """Write fetched invoices, each as `write_outcome` says (an older revision never
        overwrites a newer one; an equal one does).

        Each `InvoiceDocument` holds the invoice's columns and its JSON document (what a
        store of documents keeps, written as it is); a store that keeps models calls
        `document.model()`, which decodes each invoice once.
        """
        ...

    async def apply_deletions(self, ids: Iterable[int], at: dt.datetime) -> int:
        """Mark invoices deleted (tombstones with the time); returns how many were live."""
        ...

    async def pending(self) -> dict[int, PendingEntry]:
        """The plan of the last run that did not finish: ids still to fetch."""
        ...

    async def save_pending(self, entries: Mapping[int, PendingEntry]) -> None:
        """Replace the stored plan."""
        ...

    async def close(self) -> None: ...
