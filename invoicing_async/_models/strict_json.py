"""The models as msgspec structs, generated from their fields: a JSON member that fits
them is one the converter reads too, checked in C without building a model.

Each struct accepts less than the converter: only the types the service sends
(integers, amounts as plain decimal text or integers, RFC 3339 dates and times, lists
of objects), and null for every other name the converter reads an attribute under, so
a hyphenated or request-named duplicate never slips past. Fields the models do not
know are left alone here: `decode_member` has already parsed them, bounded, as
`decode_json` would, and the converter keeps any value in `extra`. A member that does
not fit is no error: the converter reads it and decides.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Annotated, Any

import msgspec

from invoicing_async._models.base import Model
from invoicing_async._models.invoice import Invoice
from invoicing_async._models.payloads import field_specs, read_keys
from invoicing_async._wire.json import MEMBER_REFUSALS, decode_member
from invoicing_async._wire.scalars import INT64_MAX, INT64_MIN, MAX_DEPTH

__all__ = ["Columns", "checked_invoice", "invoice_columns", "struct_for"]

_Int64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]
# Plain decimal text: at most 60 digits either side of the point, so within the
# converter's bounds on length (200) and exponent (±100) whatever the digits are.
_DecimalText = Annotated[str, msgspec.Meta(pattern=r"^-?[0-9]{1,60}(\.[0-9]{1,60})?$")]
_SCALARS: dict[Any, Any] = {
    str: str,
    int: _Int64,
    bool: bool,
    Decimal: _DecimalText | _Int64,
    dt.date: dt.date,
    dt.datetime: dt.datetime,
}

_STRUCTS: dict[type[Model], type[msgspec.Struct]] = {}


def struct_for(cls: type[Model]) -> type[msgspec.Struct]:
    """The strict struct of a model class (generated once, nested models included)."""
    found = _STRUCTS.get(cls)
    if found is not None:
        return found
    fields: list[tuple[str, Any, Any]] = []
    for spec in field_specs(cls):
        if spec.item_model is not None:
            tp: Any = list[struct_for(spec.item_model)]  # type: ignore[misc]
        else:
            tp = _SCALARS[spec.base_type]
        fields.append((spec.name, tp | None, msgspec.field(default=None, name=spec.wire)))
        # The other keys the converter reads this attribute under: null or absent only.
        for number, key in enumerate(sorted(read_keys(spec) - {spec.wire})):
            fields.append(
                (f"{spec.name}__alias{number}", None, msgspec.field(default=None, name=key))
            )
    struct = msgspec.defstruct(f"Strict{cls.__name__}", fields, gc=False, frozen=True)
    _STRUCTS[cls] = struct
    return struct


#: What a store indexes of an invoice: id, revision, invoice number, state, contact id.
Columns = tuple[int | None, int | None, str | None, str | None, int | None]


def invoice_columns(invoice: Any) -> Columns:
    """The columns of an `Invoice`, or of its strict struct (the same attribute names)."""
    return invoice.id, invoice.revision, invoice.invoice_id, invoice.state, invoice.contact_id


_INVOICE = struct_for(Invoice)


def checked_invoice(raw: bytes) -> tuple[Columns, dict[str, Any]] | None:
    """The columns and content of a sync-fetch member `{"invoice": {…}}` that the
    converter is sure to read; None when it is not sure (the caller then lets the
    converter read it).

    Fields the models do not know pass the struct unread, so the check takes only a
    member of at most `MAX_DEPTH` brackets in all: nested no deeper than the converter
    keeps (`converter.check_plain`), whatever they hold; whatever is stored reads back."""
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:
        return None
    try:
        tree = decode_member(raw)
    except MEMBER_REFUSALS:
        return None
    if tree.__class__ is not dict or len(tree) != 1:
        return None
    inner = tree.get("invoice")
    if inner.__class__ is not dict:
        return None
    try:
        return invoice_columns(msgspec.convert(inner, _INVOICE)), inner
    except msgspec.ValidationError:
        return None
