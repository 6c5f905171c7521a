"""Invoices as a store keeps them: each one's JSON document as decoded, the columns a
store indexes, and the model, built only when someone asks for it.

A sync writes thousands of invoices it never looks at. In JSON, each member of a
sync-fetch reply is checked in C against the models' strict structs (`strict_json`)
and kept as the bytes the service sent: no model is built and nothing is encoded
again. A member the check is not sure of is read by the converter, as always, and one
the converter refuses is set aside with its id and field. XML is read into models
(the check is the converter itself) and each tree is written once as JSON.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from invoicing_async._models.converter import structure
from invoicing_async._models.documents import (
    Format,
    MemberError,
    dump_model,
    load_each,
    load_model,
    member_id,
    unwrap_member,
)
from invoicing_async._models.invoice import Invoice
from invoicing_async._models.payloads import unwrap_root
from invoicing_async._models.strict_json import checked_invoice, invoice_columns
from invoicing_async._wire.json import decode_json, encode_document, split_json_array
from invoicing_async.errors import DecodeError

__all__ = ["InvoiceDocument", "as_documents", "load_invoice_documents"]


@attrs.define
class InvoiceDocument:
    """One fetched invoice for a store: `document` is `{"invoice": {…}}` as JSON bytes
    (what `SQLiteStore` and `PostgresStore` keep), with the columns they index.

    `model()` builds the `Invoice` on first use. The document is known to read: it was
    checked, or read into that model, before this object was made.
    """

    # In the order of `strict_json.Columns`.
    id: int | None
    revision: int | None
    invoice_number: str | None  # the invoice's `invoice_id`, e.g. "2014-0096"
    state: str | None
    contact_id: int | None
    document: bytes = attrs.field(repr=False)
    _model: Invoice | None = attrs.field(default=None, repr=False, eq=False, alias="model")

    @classmethod
    def of(cls, invoice: Invoice, document: bytes | None = None) -> InvoiceDocument:
        """The document of a model: `document` when given (it must hold that invoice),
        else the model written as JSON now."""
        if document is None:
            document = dump_model(invoice, "json", mode="document")
        return cls(*invoice_columns(invoice), document=document, model=invoice)

    def model(self) -> Invoice:
        """The invoice as a model (decoded once, then kept)."""
        if self._model is None:
            self._model = load_model(self.document, "json", Invoice)
        return self._model


def as_documents(
    invoices: Sequence[Invoice], documents: Sequence[bytes] | None = None
) -> list[InvoiceDocument]:
    """Models (and their documents as decoded, when given in step) as `InvoiceDocument`s."""
    if documents is not None and len(documents) == len(invoices):
        return [InvoiceDocument.of(inv, doc) for inv, doc in zip(invoices, documents, strict=True)]
    return [InvoiceDocument.of(inv) for inv in invoices]


def load_invoice_documents(
    body: bytes, fmt: Format, *, models: bool = False
) -> tuple[list[InvoiceDocument], list[MemberError]]:
    """A sync-fetch reply as documents, each member on its own: one that cannot be read
    is set aside (with its id when it has a readable one), as `load_each` does.

    `models=True` builds each model now (for a store that keeps models): checking a
    member in C and building its model later would parse it twice.
    """
    if fmt == "json" and not models:
        checked = _json_documents(body)
        if checked is not None:
            return checked
    documents: list[bytes] = []
    invoices, failed = load_each(body, fmt, Invoice, documents)
    return as_documents(invoices, documents), failed


def _json_documents(body: bytes) -> tuple[list[InvoiceDocument], list[MemberError]] | None:
    """The JSON path: members split in C, each checked in C or else read by the
    converter. None when anything concerns the body as a whole (malformed, not an array,
    a member the standard parser refuses): `load_each` then reads it and names it."""
    members = split_json_array(body)
    if members is None:
        return None
    documents: list[InvoiceDocument] = []
    failed: list[MemberError] = []
    for raw in members:
        columns = checked_invoice(raw)
        if columns is not None:
            documents.append(InvoiceDocument(*columns, document=raw))
            continue
        try:
            tree = decode_json(raw)
            root, _ = unwrap_root(tree)
            member = unwrap_member(tree, "invoice")
        except DecodeError:
            return None
        try:
            invoice = structure(member, Invoice)
        except DecodeError as exc:
            failed.append(MemberError(ident=member_id(member), error=str(exc)))
            continue
        stored = raw if root == "invoice" else encode_document("invoice", member)
        documents.append(InvoiceDocument.of(invoice, stored))
    return documents, failed
