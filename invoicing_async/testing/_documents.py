"""The fake service's invoice documents: each encoded once per format and change stamp, a
list written piece by piece from its kept members (`list_chunks`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import attrs

from invoicing_async._models.payloads import Format, to_wire
from invoicing_async._wire.json import encode_json
from invoicing_async.models import Invoice, SyncEntry
from invoicing_async.testing._real_shape import add_real_fields
from invoicing_async.testing._xml_writer import XML_DECLARATION, xml_element

__all__ = ["DocumentAllowance", "InvoiceDocuments", "sync_chunks"]

_DECLARATION = XML_DECLARATION.encode()
CHUNK_BYTES = 64 * 1024  # a streamed list goes out in pieces of about this size


def invoice_member(invoice: Invoice, fmt: Format, *, real_shape: bool = True) -> bytes:
    """One invoice as a list member: `<invoice>…</invoice>` or `{"invoice":{…}}`; with
    `real_shape`, carrying the fields the real service sent beyond the specification."""
    data = to_wire(invoice, fmt=fmt, mode="document")
    if real_shape:
        add_real_fields(data, invoice, fmt)
    if fmt == "xml":
        return xml_element("invoice", data).encode("utf-8")
    return encode_json("invoice", data)


@attrs.define
class DocumentAllowance:
    """Bytes of kept documents, shared by the accounts of one service; none kept past it."""

    limit: int = 256 * 1024 * 1024
    used: int = 0


class InvoiceDocuments:
    """Encoded invoices of one account, per format, within a (shared) allowance; in the
    real service's shape unless `real_shape=False` (the specification's fields only)."""

    def __init__(
        self, allowance: DocumentAllowance | None = None, *, real_shape: bool = True
    ) -> None:
        self.allowance = allowance or DocumentAllowance()
        self.real_shape = real_shape
        self.size = 0  # this account's share
        self.hits = 0
        self.misses = 0
        self._stamps: dict[int, int] = {}
        self._kept: dict[tuple[int, Format], tuple[Invoice, int, bytes]] = {}
        self._next = itertools.count(1)

    def changed(self, ident: int | None) -> None:
        """The invoice `ident` changed: what was kept for it is stale."""
        if ident is not None:
            self._stamps[ident] = next(self._next)

    def forget(self, ident: int) -> None:
        """The invoice is gone: drop what was kept for it."""
        self._stamps.pop(ident, None)
        for fmt in ("xml", "json"):
            entry = self._kept.pop((ident, fmt), None)
            if entry is not None:
                self._count(-len(entry[2]))

    def member(self, invoice: Invoice, fmt: Format) -> bytes:
        """The invoice as a list member, encoded now or kept from before."""
        ident = invoice.id
        if ident is None:
            return invoice_member(invoice, fmt, real_shape=self.real_shape)
        stamp = self._stamps.get(ident, 0)
        entry = self._kept.get((ident, fmt))
        if entry is not None and entry[0] is invoice and entry[1] == stamp:
            self.hits += 1
            return entry[2]
        self.misses += 1
        body = invoice_member(invoice, fmt, real_shape=self.real_shape)
        if entry is not None:
            self._count(-len(entry[2]))
            del self._kept[(ident, fmt)]
        if self.allowance.used + len(body) <= self.allowance.limit:
            self._kept[(ident, fmt)] = (invoice, stamp, body)
            self._count(len(body))
        return body

    def _count(self, change: int) -> None:
        self.size += change
        self.allowance.used += change

    def document(self, invoice: Invoice, fmt: Format) -> bytes:
        """The invoice as a whole document (what `dump_model(mode="document")` writes)."""
        body = self.member(invoice, fmt)
        return _DECLARATION + body if fmt == "xml" else body

    def list_chunks(
        self, invoices: Sequence[Invoice], fmt: Format, size: int = CHUNK_BYTES
    ) -> Iterator[bytes]:
        """The list document of `invoices` (as `dump_list` writes it), in pieces."""
        members = (self.member(invoice, fmt) for invoice in invoices)
        return _list_pieces(members, len(invoices), fmt, size)

    def list_body(self, invoices: Sequence[Invoice], fmt: Format) -> bytes:
        """The whole list document at once."""
        return b"".join(self.list_chunks(invoices, fmt))


def sync_chunks(
    entries: Sequence[SyncEntry], fmt: Format, size: int = CHUNK_BYTES
) -> Iterator[bytes]:
    """The sync list (as `dump_sync_entries` writes it), in pieces."""
    if fmt == "xml":
        members = (
            b'<invoice><id type="integer">%d</id><revision type="integer">%d</revision></invoice>'
            % (e.id, e.revision)
            for e in entries
        )
    else:
        members = (b'{"invoice":{"id":%d,"revision":%d}}' % (e.id, e.revision) for e in entries)
    return _list_pieces(members, len(entries), fmt, size)


def _list_pieces(members: Iterator[bytes], count: int, fmt: Format, size: int) -> Iterator[bytes]:
    if fmt == "xml":
        if not count:
            yield _DECLARATION + b'<invoices type="array"/>'
            return
        opening, separator, closing = _DECLARATION + b'<invoices type="array">', b"", b"</invoices>"
    else:
        opening, separator, closing = b"[", b",", b"]"
    piece = [opening]
    held = len(opening)
    first = True
    for member in members:
        if not first and separator:
            piece.append(separator)
        first = False
        piece.append(member)
        held += len(member)
        if held >= size:
            yield b"".join(piece)
            piece, held = [], 0
    piece.append(closing)
    yield b"".join(piece)
