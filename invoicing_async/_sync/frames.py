"""`store_dataframes`: a store's invoices and lines as pandas frames with exact money."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from invoicing_async._models.export import dataframes
from invoicing_async._sync.store import Store

if TYPE_CHECKING:
    import pandas

__all__ = ["store_dataframes"]


async def store_dataframes(store: Store) -> tuple[pandas.DataFrame, pandas.DataFrame]:
    """(invoices, lines) of every live invoice in `store`, typed as `invoices_dataframe` and
    `details_dataframe` type them; read from JSON documents when the store has them."""
    iter_documents = getattr(store, "iter_documents", None)
    items: list[Any]
    if iter_documents is not None:
        items = [document async for document in iter_documents()]
    else:
        items = [invoice async for invoice in store.iter_invoices()]
    return dataframes(items)
