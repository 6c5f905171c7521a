"""Ids and revisions beyond 64 bits are a `DecodeError`, never an `OverflowError` later
(in the sync list's arrays, SQLite or PostgreSQL)."""

from __future__ import annotations

import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._models.documents import load_list, load_sync_revisions

HUGE = [2**63, -(2**63) - 1, 10**30]


@pytest.mark.parametrize("value", HUGE)
def test_sync_list_ids_and_revisions_out_of_range(value: int) -> None:
    for member in (f'{{"id": {value}, "revision": 1}}', f'{{"id": 1, "revision": {value}}}'):
        with pytest.raises(ia.DecodeError, match="64-bit"):
            load_sync_revisions(f"[{member}]".encode(), "json")
    xml = (
        f'<invoices type="array"><invoice><id type="integer">{value}</id>'
        '<revision type="integer">1</revision></invoice></invoices>'
    )
    with pytest.raises(ia.DecodeError, match="64-bit"):
        load_sync_revisions(xml.encode(), "xml")


@pytest.mark.parametrize("value", HUGE)
def test_invoice_integers_out_of_range(value: int) -> None:
    with pytest.raises(ia.DecodeError, match="64-bit"):
        load_list(f'[{{"invoice": {{"id": {value}}}}}]'.encode(), "json", m.Invoice)
    xml = f'<invoices type="array"><invoice><id type="integer">{value}</id></invoice></invoices>'
    with pytest.raises(ia.DecodeError, match="64-bit"):
        load_list(xml.encode(), "xml", m.Invoice)


def test_the_largest_64_bit_values_still_decode() -> None:
    (invoice,) = load_list(f'[{{"invoice": {{"id": {2**63 - 1}}}}}]'.encode(), "json", m.Invoice)
    assert invoice.id == 2**63 - 1
