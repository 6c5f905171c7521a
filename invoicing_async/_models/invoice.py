"""Invoices and their sub-records (specification part 2.1 to 2.4)."""

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

__all__ = ["Invoice", "InvoiceDetail", "InvoiceHistoryRecord", "InvoicePayment"]


@attrs.define(kw_only=True, repr=False)
class InvoiceDetail(DetailLine):
    """One line of an invoice (spec 2.2); `invoice_id` is the numeric id of its invoice."""

    invoice_id: int | None = read_only()


@attrs.define(kw_only=True, repr=False)
class InvoiceHistoryRecord(Model):
    """An action on an invoice, or a note when `action` is empty."""

    _repr_fields: ClassVar[tuple[str, ...]] = ("id", "action", "description", "created_at")

    id: int | None = read_only()
    invoice_id: int | None = read_only()
    user_id: int | None = read_only()
    action: str | None = field()
    description: str | None = field()
    created_at: dt.datetime | None = read_only()
    updated_at: dt.datetime | None = read_only()
    extra: dict[str, Any] = extra_field()


@attrs.define(kw_only=True, repr=False)
class InvoicePayment(Model):
    """A payment registered on an invoice."""

    _repr_fields: ClassVar[tuple[str, ...]] = ("id", "payment_date", "payment_method", "price")

    id: int | None = read_only()
    invoice_id: int | None = read_only()
    credit_invoice_id: int | None = read_only()
    payment_date: dt.date | None = field()
    payment_method: str | None = field()
    price: Decimal | None = field()
    send_email: bool | None = field()
    created_at: dt.datetime | None = read_only()
    updated_at: dt.datetime | None = read_only()
    extra: dict[str, Any] = extra_field()


@attrs.define(kw_only=True, repr=False)
class Invoice(Model):
    """An invoice with its lines (`details`), `history` and `payments`."""

    _repr_fields: ClassVar[tuple[str, ...]] = (
        "id",
        "invoice_id",
        "state",
        "name",
        "currency",
        "total_price_incl_tax",
        "revision",
        "details",
    )

    id: int | None = read_only()
    concept_id: int | None = read_only()
    contact_id: int | None = field()
    company_name: str | None = field()
    firstname: str | None = field()
    lastname: str | None = field()
    contact_name: str | None = read_only()
    name: str | None = read_only()
    attention: str | None = field()
    address1: str | None = field()
    address2: str | None = field()
    zipcode: str | None = field()
    city: str | None = field()
    country: str | None = field()
    customer_id: str | None = field()
    tax_number: str | None = field()
    currency: str | None = field()
    exchange_rate: Decimal | None = read_only()
    description: str | None = field()
    discount: Decimal | None = field()
    due_date_interval: int | None = field()
    invoice_date: dt.date | None = field()
    invoice_id: str | None = field()
    invoice_profile_id: int | None = field()
    # The service chooses it; clients must not set it, so it is never sent.
    invoice_profile_version_id: int | None = read_only()
    language: str | None = field()
    po_number: str | None = field()
    prices_are_incl_tax: bool | None = field()
    show_customer_id: bool | None = field()
    show_tax: bool | None = field()
    show_tax_number: bool | None = field()
    state: str | None = read_only()
    days_open: int | None = read_only()
    email: str | None = read_only()
    invoice_email: str | None = read_only()
    invoice_email_reminder: str | None = read_only()
    invoice_hash: str | None = read_only()
    original_estimate_id: int | None = read_only()
    original_invoice_id: int | None = read_only()
    recurring_template_id: int | None = read_only()
    pay_url: str | None = read_only()
    revision: int | None = read_only()
    send_method: str | None = read_only()
    total_paid: Decimal | None = read_only()
    total_unpaid: Decimal | None = read_only()
    total_price_excl_tax: Decimal | None = read_only()
    total_price_incl_tax: Decimal | None = read_only()
    total_price_excl_tax_base: Decimal | None = read_only()
    total_price_incl_tax_base: Decimal | None = read_only()
    total_tax: Decimal | None = read_only()
    url: str | None = read_only()
    created_at: dt.datetime | None = read_only()
    updated_at: dt.datetime | None = read_only()
    details: list[InvoiceDetail] = collection(request="details_attributes")
    history: list[InvoiceHistoryRecord] = collection(read_only=True)
    payments: list[InvoicePayment] = collection(read_only=True)
    extra: dict[str, Any] = extra_field()
