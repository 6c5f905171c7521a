"""The rules the specification states, checked before a request is spent on them: each
function returns the `FieldError`s the service would answer with."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from invoicing_async._models.enums import FrequencyType
from invoicing_async.errors import FieldError
from invoicing_async.models import (
    Invoice,
    InvoiceDetail,
    InvoicePayment,
    PaymentMethod,
    RecurringTemplate,
    RecurringTemplateDetail,
    SendMethod,
)

__all__ = [
    "check_details",
    "check_invoice",
    "check_invoice_changes",
    "check_payment",
    "check_send",
    "check_template",
    "check_template_changes",
]

BLANK = "can't be blank"
AT_LEAST_ONE_LINE = "should contain at least one line"
SEND_METHODS = frozenset(m.value for m in SendMethod)
PAYMENT_METHODS = frozenset(m.value for m in PaymentMethod)
FREQUENCY_TYPES = frozenset(int(f) for f in FrequencyType)


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def check_details(
    details: Iterable[InvoiceDetail | RecurringTemplateDetail], *, creating: bool
) -> list[FieldError]:
    """New lines need description and tax_rate_id, a new document at least one line; a
    deleted line needs its id."""
    details = list(details)
    errors: list[FieldError] = []
    if creating and all(line.destroy for line in details):
        errors.append(FieldError("details", AT_LEAST_ONE_LINE))
    for line in details:
        if line.destroy:
            if line.id is None:
                errors.append(FieldError("details._destroy", "needs the id of the line to delete"))
            continue
        if creating or line.id is None:
            if _blank(line.description):
                errors.append(FieldError("details.description", BLANK))
            if line.tax_rate_id is None:
                errors.append(FieldError("details.tax_rate_id", BLANK))
    return errors


def check_invoice(invoice: Invoice) -> list[FieldError]:
    """Create rules of spec 2.1/2.2: a contact, and at least one valid line."""
    errors: list[FieldError] = []
    names = (invoice.company_name, invoice.firstname, invoice.lastname)
    if invoice.contact_id is None and all(_blank(n) for n in names):
        message = "either contact_id or one of company_name, firstname, lastname must be given"
        errors.append(FieldError("contact_id", message))
    errors.extend(check_details(invoice.details, creating=True))
    return errors


def check_invoice_changes(changes: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    if "details" in changes:
        errors.extend(check_details(changes["details"] or [], creating=False))
    return errors


def check_send(send_method: str) -> list[FieldError]:
    """Payload of spec 2.5: send_method one of email/hand/post (`email` and `invoice_email`
    may be left out, as the service allowed)."""
    return _one_of("send_method", send_method, SEND_METHODS)


def check_payment(payment: InvoicePayment) -> list[FieldError]:
    if payment.payment_method is None:
        return []
    return _one_of("payment_method", payment.payment_method, PAYMENT_METHODS)


def _one_of(attribute: str, value: str, allowed: frozenset[str]) -> list[FieldError]:
    if value in allowed:
        return []
    listed = ", ".join(sorted(allowed))
    return [FieldError(attribute, f"is not included in the list ({listed}): {value!r}")]


def _start_date_errors(start_date: dt.date | None, today: dt.date) -> list[FieldError]:
    if start_date is not None and start_date <= today:
        return [FieldError("start_date", f"must lie in the future (after {today.isoformat()})")]
    return []


def _frequency_errors(frequency: Any, frequency_type: Any, *, creating: bool) -> list[FieldError]:
    # No frequency is no error: the service took such templates (field notes; 1 then).
    errors: list[FieldError] = []
    if frequency is not None and frequency < 1:
        errors.append(FieldError("frequency", "must be greater than 0"))
    if creating and frequency_type is None:
        errors.append(FieldError("frequency_type", BLANK))
    elif frequency_type is not None and frequency_type not in FREQUENCY_TYPES:
        errors.append(FieldError("frequency_type", "must be 1 (weekly) to 5 (yearly)"))
    return errors


def check_template(template: RecurringTemplate, *, today: dt.date) -> list[FieldError]:
    """Minimum create payload of spec 4.2, and a start date in the future."""
    errors: list[FieldError] = []
    if template.contact_id is None:
        errors.append(FieldError("contact_id", BLANK))
    errors.extend(_frequency_errors(template.frequency, template.frequency_type, creating=True))
    errors.extend(check_details(template.details, creating=True))
    errors.extend(_start_date_errors(template.start_date, today))
    return errors


def check_template_changes(changes: Mapping[str, Any], *, today: dt.date) -> list[FieldError]:
    errors = _frequency_errors(
        changes.get("frequency"), changes.get("frequency_type"), creating=False
    )
    if "details" in changes:
        errors.extend(check_details(changes["details"] or [], creating=False))
    errors.extend(_start_date_errors(changes.get("start_date"), today))
    return errors
