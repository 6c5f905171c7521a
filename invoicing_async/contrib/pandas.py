"""Invoices as pandas frames (the `[pandas]` extra): typed columns, money as exact Arrow
decimals, lines linked to their invoices by `invoice_id`."""

from invoicing_async._models.export import details_dataframe, invoices_dataframe
from invoicing_async._sync.store import store_dataframes

__all__ = ["details_dataframe", "invoices_dataframe", "store_dataframes"]
