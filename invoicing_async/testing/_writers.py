"""The documents only the service writes: lists, sync lists and 422 errors, as the
fake service (and the tests) send them. The client never writes them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from invoicing_async._models.base import Model
from invoicing_async._models.fields import Format, wire_key
from invoicing_async._models.invoice import Invoice
from invoicing_async._models.payloads import ROOTS, to_wire
from invoicing_async._models.session import SyncEntry
from invoicing_async._wire.json import encode_json
from invoicing_async._wire.xml import PlainList, encode_xml
from invoicing_async.errors import FieldError
from invoicing_async.testing._real_shape import add_real_fields

__all__ = ["dump_field_errors", "dump_invoice", "dump_list", "dump_sync_entries"]


def _tree(model: Model, fmt: Format, real_shape: bool) -> dict[str, Any]:
    data = to_wire(model, fmt=fmt, mode="document")
    if real_shape and isinstance(model, Invoice):
        add_real_fields(data, model, fmt)
    return data


def dump_invoice(invoice: Invoice, fmt: Format, *, real_shape: bool = False) -> bytes:
    """One invoice document encoded from scratch (`real_shape`: with the real service's
    fields beyond the specification), what the fake's kept documents must equal."""
    data = _tree(invoice, fmt, real_shape)
    return encode_xml("invoice", data) if fmt == "xml" else encode_json("invoice", data)


def dump_list(
    models: Sequence[Model], fmt: Format, cls: type[Model], *, real_shape: bool = False
) -> bytes:
    """A list document as the service writes it: XML in its list root, JSON bare, each
    member wrapped in its own root (invoices with the real service's fields when
    `real_shape`)."""
    single, many = ROOTS[cls]
    items = [_tree(m, fmt, real_shape) for m in models]
    if fmt == "xml":
        return encode_xml(wire_key(many, fmt), items)
    return encode_json(None, [{single: item} for item in items])


def dump_sync_entries(entries: Iterable[SyncEntry], fmt: Format) -> bytes:
    """The sync list as the service writes it."""
    items = [{"id": e.id, "revision": e.revision} for e in entries]
    if fmt == "xml":
        return encode_xml("invoices", items)
    return encode_json(None, [{"invoice": item} for item in items])


def dump_field_errors(errors: Sequence[FieldError], fmt: Format) -> bytes:
    """A 422 body in the service's current shape."""
    if fmt == "xml":
        members = [{"attribute": e.attribute, "message": e.message} for e in errors]
        return encode_xml("errors", PlainList("error", members))
    return encode_json(None, [[e.attribute, e.message] for e in errors])
