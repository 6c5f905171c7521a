"""The documents only the service writes: lists, sync lists and 422 errors, as the
fake service (and the tests) send them. The client never writes them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from invoicing_async._models.base import Model
from invoicing_async._models.fields import Format, wire_key
from invoicing_async._models.payloads import ROOTS, to_wire
from invoicing_async._models.session import SyncEntry
from invoicing_async._wire.json import encode_json
from invoicing_async._wire.xml import PlainList, encode_xml
from invoicing_async.errors import FieldError

__all__ = ["dump_field_errors", "dump_list", "dump_sync_entries"]


def dump_list(models: Sequence[Model], fmt: Format, cls: type[Model]) -> bytes:
    """A list document as the service writes it: XML in its list root, JSON bare, each
    member wrapped in its own root."""
    single, many = ROOTS[cls]
    items = [to_wire(m, fmt=fmt, mode="document") for m in models]
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
