"""What the sync engine needs from a place that keeps invoices: the `Store` protocol,
the revision rule every store applies, and the reads all stores share."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol, runtime_checkable

import attrs

from invoicing_async._models.documents import load_model
from invoicing_async._models.export import dataframes
from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._text import package_logger
from invoicing_async.errors import DecodeError
from invoicing_async.models import Invoice

if TYPE_CHECKING:
    import pandas

__all__ = [
    "BatchResult",
    "DocumentQueries",
    "PendingEntry",
    "Store",
    "WriteOutcome",
    "newest",
    "read_stored",
    "store_dataframes",
    "write_outcome",
]

logger = package_logger("invoicing_async.sync")

#: What writing one fetched invoice does to a store's copy.
WriteOutcome = Literal["created", "updated", "stale"]


def write_outcome(fetched: int, stored: int | None, *, deleted: bool = False) -> WriteOutcome:
    """The revision rule: whether a fetched invoice (revision `fetched`) is written over the
    store's copy (`stored`, None when absent; `deleted`: a tombstone).

    Older never overwrites; equal does (a later fetch of the same second may hold a later
    change); a tombstoned invoice comes back. `UPSERT_BATCH` says the same in SQL."""
    if stored is None or deleted:
        return "created"
    return "updated" if fetched >= stored else "stale"


def newest(documents: Iterable[InvoiceDocument]) -> list[InvoiceDocument]:
    """One document per id, the one `write_outcome` keeps of an id given twice (the later
    of equal revisions); documents without an id are dropped."""
    best: dict[int, InvoiceDocument] = {}
    for doc in documents:
        if doc.id is None:
            continue
        held = best.get(doc.id)
        stored = None if held is None else held.revision or 0
        if write_outcome(doc.revision or 0, stored) != "stale":
            best[doc.id] = doc
    return list(best.values())


def read_stored(rows: Iterable[tuple[int, bytes]], *, wanted: int | None = None) -> list[Invoice]:
    """Stored documents (id, document) read back as models; one that cannot be read is
    skipped with a warning, or, when it is the one `wanted`, `DecodeError` names it."""
    invoices: list[Invoice] = []
    for ident, document in rows:
        try:
            invoices.append(load_model(bytes(document), "json", Invoice))
        except (DecodeError, RecursionError) as exc:
            if ident == wanted:
                raise DecodeError(f"stored invoice {ident} cannot be read: {exc}") from None
            logger.warning("stored invoice %d cannot be read, skipped: %s", ident, exc)
    return invoices


class DocumentQueries:
    """The reads an SQL store answers from its stored documents, over one query of its own:
    `_rows`, the live rows (id, document) matching `where` (`_MARK` its placeholder), by id."""

    _MARK: ClassVar[str]

    async def _rows(
        self, where: str, args: tuple[object, ...], limit: int | None = None
    ) -> list[tuple[int, bytes]]:
        raise NotImplementedError

    async def _select(self, column: str, value: object, wanted: int | None = None) -> list[Invoice]:
        return read_stored(await self._rows(f"{column} = {self._MARK}", (value,)), wanted=wanted)

    async def get(self, invoice_id: int) -> Invoice | None:
        found = await self._select("id", invoice_id, wanted=invoice_id)
        return found[0] if found else None

    async def get_by_invoice_number(self, invoice_number: str) -> Invoice | None:
        found = await self._select("invoice_number", invoice_number)
        return next((inv for inv in found if inv.invoice_id == invoice_number), None)

    async def by_state(self, state: str) -> list[Invoice]:
        return [inv for inv in await self._select("state", state) if inv.state == state]

    async def by_contact(self, contact_id: int) -> list[Invoice]:
        return await self._select("contact_id", contact_id)

    async def iter_invoices(self, *, page: int = 500) -> AsyncIterator[Invoice]:
        """Every live invoice, by id, `page` rows a query (bounded memory, nothing held on
        the database between pages); a row that cannot be read is skipped with a warning."""
        async for rows in self._pages(page):
            for invoice in read_stored(rows):
                yield invoice

    async def iter_documents(self, *, page: int = 500) -> AsyncIterator[bytes]:
        """Every live invoice's JSON document (`{"invoice": {…}}`), by id, `page` rows a
        query: for readers that need no model (`store_dataframes`)."""
        async for rows in self._pages(page):
            for _, document in rows:
                yield bytes(document)

    async def _pages(self, page: int) -> AsyncIterator[list[tuple[int, bytes]]]:
        """The live rows (id, document), by id, `page` at a time."""
        after = -(2**63)
        while True:
            rows = await self._rows(f"id > {self._MARK}", (after,), limit=page)
            if rows:
                yield rows
            if len(rows) < page:
                return
            after = rows[-1][0]


@attrs.frozen
class BatchResult:
    """What writing one fetched batch did (`Store.apply_documents`): the ids created,
    updated, and left alone as stale, as `write_outcome` decided for each."""

    created: list[int]
    updated: list[int]
    stale: list[int]  # fetched revision older than the stored one: not written


@attrs.frozen
class PendingEntry:
    """An id planned to fetch, as a store keeps it between runs: its listed revision, fetch
    attempts so far, and whether (and since when) it is quarantined."""

    id: int
    revision: int
    attempts: int = 0
    quarantined: bool = False
    since: float = 0.0  # when it was quarantined (Unix time)


@runtime_checkable
class Store(Protocol):
    """A local copy of an account's invoices, with their revisions and the pending plan:
    what `SyncEngine` writes to. Every write commits before it returns (a batch atomically)."""

    async def revisions(self) -> Mapping[int, int]:
        """Revision of every live invoice, by id (a mapping; a large store returns the compact
        `SyncRevisions`)."""
        ...

    async def get(self, invoice_id: int) -> Invoice | None:
        """The stored invoice, or None when unknown or deleted."""
        ...

    def iter_invoices(self) -> AsyncIterator[Invoice]:
        """Every live invoice, by id, as an async iterator (for exports and pandas)."""
        ...

    async def apply_documents(self, documents: Sequence[InvoiceDocument]) -> BatchResult:
        """Write fetched invoices, each as `write_outcome` says; a store that keeps models calls
        `document.model()`."""
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


async def store_dataframes(store: Store) -> tuple[pandas.DataFrame, pandas.DataFrame]:
    """(invoices, lines) of every live invoice in `store`, typed as `invoices_dataframe` and
    `details_dataframe` type them; read from JSON documents when the store has them."""
    each = getattr(store, "iter_documents", store.iter_invoices)
    return dataframes([item async for item in each()])
