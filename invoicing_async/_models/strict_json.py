"""The strict struct of an invoice: a JSON sync-fetch member that fits it is one the
converter reads too, checked in C as it is decoded, without building a model. It accepts
less than the converter (only what the service sends); a member that does not fit is no
error: the converter reads it and decides."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Annotated, Any

import msgspec

from invoicing_async._models.base import Model
from invoicing_async._models.fields import field_specs, read_keys
from invoicing_async._models.invoice import Invoice
from invoicing_async._wire.scalars import INT64_MAX, INT64_MIN, MAX_DEPTH

__all__ = ["Columns", "checked_invoice", "invoice_columns", "strict_invoice", "struct_for"]

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

_STRUCTS: dict[tuple[type[Model], bool], type[msgspec.Struct]] = {}


def struct_for(cls: type[Model], *, closed: bool = False) -> type[msgspec.Struct]:
    """The strict struct of a model class (made once, nested models included); a
    `closed` one refuses fields the models do not know, so it checks every value."""
    found = _STRUCTS.get((cls, closed))
    if found is not None:
        return found
    fields: list[tuple[str, Any, Any]] = []
    for spec in field_specs(cls):
        if spec.item_model is not None:
            tp: Any = list[struct_for(spec.item_model, closed=closed)]  # type: ignore[misc]
        else:
            tp = _SCALARS[spec.base_type]
        fields.append((spec.name, tp | None, msgspec.field(default=None, name=spec.wire)))
        # The other keys the converter reads this attribute under: null or absent only.
        for number, key in enumerate(sorted(read_keys(spec) - {spec.wire})):
            fields.append(
                (f"{spec.name}__alias{number}", None, msgspec.field(default=None, name=key))
            )
    name = f"{'Closed' if closed else 'Strict'}{cls.__name__}"
    struct = msgspec.defstruct(name, fields, gc=False, frozen=True, forbid_unknown_fields=closed)
    _STRUCTS[cls, closed] = struct
    return struct


#: What a store indexes of an invoice: id, revision, invoice number, state, contact id.
Columns = tuple[int | None, int | None, str | None, str | None, int | None]


def invoice_columns(invoice: Any) -> Columns:
    """The columns of an `Invoice`, or of its strict struct (the same attribute names)."""
    return invoice.id, invoice.revision, invoice.invoice_id, invoice.state, invoice.contact_id


_MEMBERS: list[msgspec.json.Decoder[Any]] = [
    msgspec.json.Decoder(
        msgspec.defstruct(
            "InvoiceMember",
            [("invoice", struct_for(Invoice, closed=closed))],
            gc=False,
            forbid_unknown_fields=True,
        )
    )
    for closed in (True, False)
]
# What the struct skips unread in a field the models do not know and the converter's
# reader refuses: a lone surrogate escape (in a value or a key), a number with an
# exponent or of 30 characters and more (bounded by `parse_decimal`). A false alarm
# (such text inside a string) only sends the member to the converter. Screened with
# bytes methods (C loops) rather than a regular expression tried at every comma: a real
# invoice (every one has fields beyond the models) takes ~3 µs, not ~60.
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
# Digits and "." to "0", "e" and "E" to "e": a number's run of digits reads "000", an
# exponent "0e".
_NUMERIC = bytes.maketrans(b"0123456789.E", b"00000000000e")
_LONG_RUN = b"0" * 30
_DIGITS = frozenset(b"0123456789.")
_BLANKS = frozenset(b" \t\n\r")
_BEFORE_VALUE = frozenset(b":,[")


def _unsure(raw: bytes) -> bool:
    """Whether `raw` may hold what the converter's reader refuses (see above)."""
    if _SURROGATE.search(raw):
        return True
    marked = raw.translate(_NUMERIC)
    if _LONG_RUN in marked:
        return True
    at = marked.find(b"0e")
    while at >= 0:
        start = at
        while start >= 0 and raw[start] in _DIGITS:  # back to the start of the digits
            start -= 1
        if start >= 0 and raw[start] == 0x2D:  # "-"
            start -= 1
        while start >= 0 and raw[start] in _BLANKS:
            start -= 1
        if start < 0 or raw[start] in _BEFORE_VALUE:
            return True  # a number's exponent (or a false alarm), not "9e" inside a text
        at = marked.find(b"0e", at + 2)
    return False


def checked_invoice(raw: bytes, *, keep_values: bool = True) -> tuple[Columns, Any] | None:
    """The columns of a sync-fetch member `{"invoice": {…}}` that the converter is sure
    to read, decoded straight into the strict struct, and that closed struct when the
    member fits it (its values are the model's, by the same names); None when it is not
    sure (the caller then lets the converter read it). The closed struct checks every
    value; a member with fields the models do not know is screened (above, UTF-8, at most
    `MAX_DEPTH` brackets in all) before the open struct skips them, so whatever is
    stored reads back. Without `keep_values` the closed struct is not tried: only the
    columns are wanted, and every real invoice has fields it refuses."""
    closed, open_ = _MEMBERS
    if keep_values:
        try:
            invoice = closed.decode(raw).invoice
            return invoice_columns(invoice), invoice
        except (msgspec.DecodeError, ValueError):  # ValueError: not UTF-8
            pass
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH or _unsure(raw):
        return None
    try:
        if not raw.isascii():
            raw.decode()  # the struct skips unknown fields without checking their text
        return invoice_columns(open_.decode(raw).invoice), None
    except (msgspec.DecodeError, ValueError):
        return None


def strict_invoice(document: bytes) -> Any:
    """The invoice of a stored document (`{"invoice": {…}}`) as its strict struct, typed in
    C with no model; None when it does not fit (the converter then reads it)."""
    try:
        return _MEMBERS[1].decode(document).invoice
    except (msgspec.DecodeError, ValueError):  # ValidationError included; ValueError: not UTF-8
        return None
