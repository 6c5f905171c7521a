"""Recurring templates and their lines (specification part 2.6 and 2.7)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, ClassVar

import attrs

from invoicing_async._models.base import (
    DetailLine,
    Model,
    collection,
    extra_field,
    field,
    read_only,
)

__all__ = ["RecurringTemplate", "RecurringTemplateDetail"]


@attrs.define(kw_only=True, repr=False)
class RecurringTemplateDetail(DetailLine):
    """One line of a recurring template (spec 2.7)."""


@attrs.define(kw_only=True, repr=False)
class RecurringTemplate(Model):
    """A template that generates invoices on a schedule (`frequency_type`: `FrequencyType`)."""

    _repr_fields: ClassVar[tuple[str, ...]] = (
        "id",
        "contact_id",
        "frequency",
        "frequency_type",
        "next_date",
        "active",
        "details",
    )

    id: int | None = read_only()
    contact_id: int | None = field()
    active: bool | None = read_only()
    currency: str | None = field()
    discount: Decimal | None = field()
    frequency: int | None = field()
    frequency_type: int | None = field()
    invoice_profile_id: int | None = field()
    occurences: int | None = field()
    number_of_occurences: int | None = read_only()
    send_invoice: bool | None = field()
    start_date: dt.date | None = field()
    last_date: dt.date | None = read_only()
    next_date: dt.date | None = read_only()
    template_id: int | None = field()
    total_price_excl_tax: Decimal | None = read_only()
    total_price_incl_tax: Decimal | None = read_only()
    created_at: dt.datetime | None = read_only()
    updated_at: dt.datetime | None = read_only()
    details: list[RecurringTemplateDetail] = collection(request="details_attributes")
    extra: dict[str, Any] = extra_field()
