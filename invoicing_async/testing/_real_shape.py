"""The fields beyond the specification that the real service sent on every invoice, line
and payment (field notes: `tax_components`, `sepa_active`, `sent_at`, `tax` on lines, …),
added to the fake's documents so that decoding `extra` is exercised where users meet it."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import attrs

from invoicing_async._models.fields import snake_name, wire_key
from invoicing_async._models.payloads import Format
from invoicing_async._wire.json import decode_json, encode_json
from invoicing_async.models import Invoice

__all__ = ["add_real_fields", "as_read"]

_SENDER_ADDRESS = "Example B.V.\nKeizersgracht 1\n1015 CJ Amsterdam"
_LEADING_NUMBER = re.compile(r"\s*(\d+(?:\.\d+)?)")
_ZERO = Decimal("0.0")


def _amount_plain(amount: str | None) -> Decimal:
    """The number a line's amount text starts with (`"3 hours"` -> 3), 1 without one."""
    found = _LEADING_NUMBER.match(amount or "")
    return Decimal(found.group(1)) if found else Decimal(1)


def _tax(excl: Decimal | None, incl: Decimal | None) -> Decimal:
    return (incl or _ZERO) - (excl or _ZERO)


def add_real_fields(data: dict[str, Any], invoice: Invoice, fmt: Format) -> None:
    """Add to `data` (the invoice's wire tree from `to_wire`, mode "document") what the
    real service wrote beside the specified fields, spelt for `fmt`."""

    def key(name: str) -> str:
        return wire_key(name, fmt)

    components: dict[int | None, Decimal] = {}
    for line, wire in zip(invoice.details, data.get(key("details")) or (), strict=False):
        tax = _tax(line.total_price_excl_tax, line.total_price_incl_tax)
        components[line.tax_rate_id] = components.get(line.tax_rate_id, _ZERO) + tax
        wire[key("tax")] = tax
        wire[key("amount_plain")] = _amount_plain(line.amount)
    for payment, wire in zip(invoice.payments, data.get(key("payments")) or (), strict=False):
        wire[key("price_base")] = payment.price
    sent = invoice.state != "draft"
    data[key("tax_components")] = [
        {key("tax_rate_id"): rate, key("total_tax"): total} for rate, total in components.items()
    ]
    data[key("sender_address")] = _SENDER_ADDRESS
    data[key("attachments")] = []
    data[key("sepa_active")] = False
    data[key("sent_at")] = invoice.created_at if sent else None
    data[key("transactions")] = []


def as_read(invoice: Invoice, fmt: Format) -> Invoice:
    """`invoice` as a client reads it from its real-shaped document in `fmt`: the fields
    beyond the specification in its `extra` and its lines' and payments', as that format
    decodes them (JSON's decimals and times as text; XML's typed, nested names dashed)."""
    data: dict[str, Any] = {
        wire_key("details", fmt): [{} for _ in invoice.details],
        wire_key("payments", fmt): [{} for _ in invoice.payments],
    }
    add_real_fields(data, invoice, fmt)
    lines = data.pop(wire_key("details", fmt))
    payments = data.pop(wire_key("payments", fmt))

    def read(extra: dict[str, Any]) -> dict[str, Any]:
        if fmt == "json":
            decoded: dict[str, Any] = decode_json(encode_json(None, extra))
            return decoded
        return {snake_name(name): value for name, value in extra.items()}

    return attrs.evolve(
        invoice,
        extra={**invoice.extra, **read(data)},
        details=[
            attrs.evolve(line, extra={**line.extra, **read(extra)})
            for line, extra in zip(invoice.details, lines, strict=True)
        ],
        payments=[
            attrs.evolve(payment, extra={**payment.extra, **read(extra)})
            for payment, extra in zip(invoice.payments, payments, strict=True)
        ],
    )
