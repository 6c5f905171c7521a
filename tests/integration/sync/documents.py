"""Models as the documents a store is given (`Store.apply_documents`)."""

from __future__ import annotations

from collections.abc import Iterable

from invoicing_async import models as m
from invoicing_async.sync import InvoiceDocument


def documents_of(invoices: Iterable[m.Invoice]) -> list[InvoiceDocument]:
    """Each invoice with its document written now, as a source of models gives them."""
    return [InvoiceDocument.of(invoice) for invoice in invoices]
