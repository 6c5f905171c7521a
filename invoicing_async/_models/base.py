"""What every model shares: field metadata (read-only, wire names), a short repr, `to_dict`."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, ClassVar

import attrs

from invoicing_async._wire.json import json_text
from invoicing_async._wire.scalars import format_decimal

__all__ = ["DetailLine", "Model", "collection", "extra_field", "field", "read_only"]

READ_ONLY = "invoicing.read_only"
WIRE_NAME = "invoicing.wire_name"
REQUEST_NAME = "invoicing.request_name"


def field(*, wire: str | None = None, request: str | None = None, read_only: bool = False) -> Any:
    """A model attribute, None unless set; `wire`: its name on the wire when it differs
    (`_destroy`), `request`: its name in request bodies (`details_attributes`)."""
    metadata: dict[str, Any] = {READ_ONLY: read_only}
    if wire is not None:
        metadata[WIRE_NAME] = wire
    if request is not None:
        metadata[REQUEST_NAME] = request
    return attrs.field(default=None, metadata=metadata)


def read_only() -> Any:
    """An attribute the service returns and clients never send."""
    return field(read_only=True)


def collection(*, request: str | None = None, read_only: bool = False) -> Any:
    metadata: dict[str, Any] = {READ_ONLY: read_only}
    if request is not None:
        metadata[REQUEST_NAME] = request
    return attrs.field(factory=list, metadata=metadata)


def extra_field() -> Any:
    """Attributes the service sent that the model does not know: kept, never sent back.
    Compared as a JSON document keeps them (`as_json_text`), so a stored copy equals the
    fresh one whatever format it came in."""
    return attrs.field(factory=dict, repr=False, eq=as_json_text)


def as_json_text(value: Any) -> Any:
    """`value` with its decimals, floats, datetimes and dates as the text a JSON document
    holds them in: XML's typed values (`type="decimal"`) come back from a store as text."""
    if isinstance(value, dict):
        return {key: as_json_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_json_text(item) for item in value]
    if isinstance(value, float):
        return format_decimal(Decimal(repr(value)))
    if isinstance(value, (Decimal, dt.date)):
        return json_text(value)
    return value


class Model:
    """Base of the attrs models: a repr that fits on a line, and row-friendly export."""

    __slots__ = ()
    _repr_fields: ClassVar[tuple[str, ...]] = ("id",)

    def __repr__(self) -> str:
        parts = []
        for name in self._repr_fields:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, list):
                parts.append(f"{name}=[{len(value)} items]")
            else:
                parts.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        """Every attribute as plain Python values (`Decimal`, `date` kept), `extra` included;
        nested models as dicts."""
        return attrs.asdict(self)  # type: ignore[arg-type]


@attrs.define(kw_only=True, repr=False)
class DetailLine(Model):
    """The attributes every line (of an invoice or of a template) has; `destroy=True` with an
    `id` deletes the line in an update (`_destroy`)."""

    _repr_fields: ClassVar[tuple[str, ...]] = ("id", "description", "amount", "price", "destroy")

    id: int | None = field()
    amount: str | None = field()
    description: str | None = field()
    price: Decimal | None = field()
    tax_rate_id: int | None = field()
    ledger_account_id: int | None = field()
    row_order: int | None = field()
    total_price_excl_tax: Decimal | None = read_only()
    total_price_incl_tax: Decimal | None = read_only()
    created_at: dt.datetime | None = read_only()
    updated_at: dt.datetime | None = read_only()
    destroy: bool | None = field(wire="_destroy")
    extra: dict[str, Any] = extra_field()
