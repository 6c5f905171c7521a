"""Invoices as a store keeps them: each one's JSON document, the columns a store indexes,
and the model, built only when asked for. A sync-fetch reply's members are judged one by
one: one that cannot be read is set aside with its id and field, its neighbours kept."""

from __future__ import annotations

import json
from typing import Any

import attrs

from invoicing_async._models.converter import structure
from invoicing_async._models.documents import (
    Format,
    MemberError,
    list_root_check,
    load_model,
    member_id,
    unwrap_member,
)
from invoicing_async._models.invoice import Invoice
from invoicing_async._models.payloads import dump_model, unwrap_root
from invoicing_async._models.strict_json import checked_invoice, invoice_columns
from invoicing_async._wire.json import decode_json, encode_json, split_members
from invoicing_async._wire.xml import BadMember, decode_xml_members
from invoicing_async.errors import DecodeError

__all__ = ["InvoiceDocument", "load_invoice_documents"]


@attrs.define
class InvoiceDocument:
    """One fetched invoice as a store receives it: `document` is `{"invoice": {…}}` as JSON
    bytes (known to read) with the indexed columns; `model()` reads it on first use."""

    # In the order of `strict_json.Columns`.
    id: int | None
    revision: int | None
    invoice_number: str | None  # the invoice's `invoice_id`, e.g. "2014-0096"
    state: str | None
    contact_id: int | None
    document: bytes = attrs.field(repr=False)
    _model: Invoice | None = attrs.field(default=None, repr=False, eq=False, alias="model")
    #: The closed strict struct the member was checked with, when asked to keep it.
    _checked: Any = attrs.field(default=None, repr=False, eq=False, alias="checked")

    @classmethod
    def of(cls, invoice: Invoice, document: bytes | None = None) -> InvoiceDocument:
        """The document of a model: `document` when given (it must hold that invoice),
        else the model written as JSON now (for sources and tests that hold models)."""
        if document is None:
            document = dump_model(invoice, "json", mode="document")
        return cls(*invoice_columns(invoice), document=document, model=invoice)

    def model(self) -> Invoice:
        """The invoice as a model (decoded once, then kept)."""
        if self._model is None:
            self._model = load_model(self.document, "json", Invoice)
        return self._model

    def values(self) -> Any:
        """The invoice's values by the model's attribute names: the closed strict struct
        it was checked with (typed in C, no model; kept with `keep_values=True`), else the
        model (which keeps fields the models do not know in `extra`)."""
        return self.model() if self._checked is None else self._checked


def load_invoice_documents(
    body: bytes, fmt: Format, *, limit: int, keep_values: bool = False
) -> tuple[list[InvoiceDocument], list[MemberError]]:
    """A sync-fetch reply as documents, each member on its own (one that cannot be read is
    set aside); more than `limit` members is refused before any document is made. With
    `keep_values` each document keeps the struct it was checked with (`values()`), for a
    consumer that reads every value; a store does not."""
    if fmt == "json":
        judged = [_json_member(raw, keep_values) for raw in split_members(body, limit)]
    else:
        judged = _xml_members(body, limit)
    documents = [d for d in judged if isinstance(d, InvoiceDocument)]
    failed = [d for d in judged if isinstance(d, MemberError)]
    return documents, failed


def _json_member(raw: bytes, keep_values: bool) -> InvoiceDocument | MemberError:
    """One JSON member: checked in C, or else read by the converter."""
    checked = checked_invoice(raw, keep_values=keep_values)
    if checked is not None:
        columns, struct = checked
        return InvoiceDocument(*columns, document=raw, checked=struct if keep_values else None)
    try:
        tree = decode_json(raw)
    except DecodeError as exc:
        return MemberError(ident=_id_of_unreadable(raw), error=str(exc))
    root, _ = unwrap_root(tree)
    try:
        member = unwrap_member(tree, "invoice")
        invoice = structure(member, Invoice)
    except DecodeError as exc:
        inner = tree if root is None else unwrap_root(tree)[1]
        return MemberError(ident=member_id(inner), error=str(exc))
    stored = raw if root == "invoice" else encode_json("invoice", member)
    return InvoiceDocument.of(invoice, stored)


def _id_of_unreadable(raw: bytes) -> int | None:
    """The id of a member whose values cannot all be read (`1e999`), read as text."""
    try:
        tree = json.loads(raw, parse_float=str, parse_int=str, parse_constant=str)
    except (ValueError, RecursionError):
        return None
    return member_id(unwrap_root(tree)[1])


def _xml_members(body: bytes, limit: int) -> list[InvoiceDocument | MemberError]:
    judged: list[InvoiceDocument | MemberError] = []

    check_root = list_root_check("invoice", "invoices")

    def add(member: Any) -> None:
        if len(judged) >= limit:
            raise DecodeError(f"a reply of more than {limit} members, the most it may hold")
        if member.__class__ is BadMember:
            field = f"Invoice.{member.path}: " if member.path else ""
            judged.append(MemberError(member_id(member.value), f"{field}{member.error}"))
            return
        tree = {} if member == "" else member
        try:
            invoice = structure(tree, Invoice)
        except DecodeError as exc:
            judged.append(MemberError(ident=member_id(tree), error=str(exc)))
            return
        judged.append(InvoiceDocument.of(invoice, encode_json("invoice", tree)))

    root = decode_xml_members(body, add, check_root, judge_members=True)
    check_root(root)
    return judged
