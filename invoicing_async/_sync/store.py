"""What the sync engine needs from a place that keeps invoices: the `Store` protocol."""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import attrs

from invoicing_async._models.stored import InvoiceDocument, as_documents
from invoicing_async.models import Invoice

__all__ = [
    "BatchResult",
    "DocumentStore",
    "PendingEntry",
    "Store",
    "as_documents",
    "takes_documents",
]


@attrs.frozen
class BatchResult:
    """What committing one fetched batch did."""

    created: list[int]
    updated: list[int]
    stale: list[int]  # fetched revision older than the stored one: not written


@attrs.frozen
class PendingEntry:
    """An id the engine has planned to fetch: its listed revision and fetch attempts so far."""

    id: int
    revision: int
    attempts: int = 0
    quarantined: bool = False
    since: float = 0.0  # when it was quarantined (Unix time)


@runtime_checkable
class Store(Protocol):
    """A local copy of an account's invoices, with their revisions and the pending plan.

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

    async def apply_batch(
        self, invoices: Sequence[Invoice], documents: Sequence[bytes] | None = None
    ) -> BatchResult:
        """Write fetched invoices; an older revision never overwrites a newer one.

        `documents`, when given, holds each invoice as decoded (in step with `invoices`),
        for stores that keep documents: written as they are instead of encoded again.

        An equal revision does overwrite: revisions are whole seconds, and a later fetch of
        the same second may hold a later change.
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


@runtime_checkable
class DocumentStore(Store, Protocol):
    """A store that takes fetched invoices as documents: the engine then never builds a
    model to store one (`SQLiteStore`, `PostgresStore` and `MemoryStore` are such stores;
    a `Store` without `apply_documents` is given models through `apply_batch`)."""

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        """`apply_batch`, for invoices given as `InvoiceDocument`s (columns, document and
        a model built only on `model()`); the same guarantees."""
        ...


def takes_documents(store: Store) -> bool:
    """Whether `store.apply_batch` accepts `documents` (a store written before it did
    not): the engine passes them only then."""
    try:
        parameters = inspect.signature(store.apply_batch).parameters
    except (TypeError, ValueError):
        return False
    return "documents" in parameters or any(
        p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters.values()
    )
