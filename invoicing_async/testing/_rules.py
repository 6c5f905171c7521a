"""The service's business rules as the fake applies them: totals, validation, line changes."""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any, TypeVar

import attrs

from invoicing_async._models.base import DetailLine
from invoicing_async._resources.validation import check_invoice, check_template
from invoicing_async._wire.scalars import MAX_NUMBER_CHARS
from invoicing_async.errors import FieldError
from invoicing_async.models import (
    Invoice,
    InvoiceDetail,
    RecurringTemplate,
    RecurringTemplateDetail,
)

__all__ = [
    "DEFAULT_TAX_RATES",
    "compute_detail_totals",
    "compute_invoice_totals",
    "invoice_errors",
    "new_line",
    "quantity",
    "template_errors",
    "with_changes",
]

CENT = Decimal("0.01")
DEFAULT_TAX_RATES: dict[int, Decimal] = {1: Decimal("21"), 2: Decimal("9"), 3: Decimal("0")}
_QUANTITY = re.compile(r"^\s*(-?\d+(?:[.,]\d+)?)")


class Unprocessable(Exception):
    """The request breaks a rule: answered with 422 and these errors."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


class Missing(Exception):
    """The entity does not exist: answered with 404."""


def without(mapping: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """`mapping` less the named keys."""
    return {k: v for k, v in mapping.items() if k not in names}


def money(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def quantity(amount: str | None) -> Decimal:
    """The number at the start of a free-text amount (`"2 hours"` -> 2); 1 when none."""
    if not amount:
        return Decimal(1)
    match = _QUANTITY.match(amount)
    return Decimal(match.group(1).replace(",", ".")) if match else Decimal(1)


def compute_detail_totals(
    line: InvoiceDetail | RecurringTemplateDetail,
    tax_rates: Mapping[int, Decimal],
    *,
    incl_tax: bool,
) -> None:
    rate = tax_rates.get(line.tax_rate_id or 0, Decimal(0)) / 100
    gross = quantity(line.amount) * (line.price or Decimal(0))
    if incl_tax:
        line.total_price_incl_tax = money(gross)
        line.total_price_excl_tax = money(gross / (1 + rate))
    else:
        line.total_price_excl_tax = money(gross)
        line.total_price_incl_tax = money(gross * (1 + rate))


def compute_invoice_totals(
    invoice: Invoice | RecurringTemplate, tax_rates: Mapping[int, Decimal]
) -> None:
    """Totals from the lines, the discount (a percentage) and the tax rates, exact for any
    amount the client may send (the default 28 digits refused a price of 1E+30 to cents)."""
    with localcontext() as exact:
        exact.prec = 2 * MAX_NUMBER_CHARS + 10
        _totals(invoice, tax_rates)


def _totals(invoice: Invoice | RecurringTemplate, tax_rates: Mapping[int, Decimal]) -> None:
    incl = bool(getattr(invoice, "prices_are_incl_tax", False))
    show_tax = getattr(invoice, "show_tax", True) is not False
    factor = 1 - (invoice.discount or Decimal(0)) / 100
    excl_sum = Decimal(0)
    incl_sum = Decimal(0)
    for line in invoice.details:
        compute_detail_totals(line, tax_rates, incl_tax=incl)
        excl_sum += line.total_price_excl_tax or 0
        incl_sum += line.total_price_incl_tax or 0
    excl_total = money(excl_sum * factor)
    tax_total = money((incl_sum - excl_sum) * factor) if show_tax else Decimal("0.00")
    invoice.total_price_excl_tax = excl_total
    invoice.total_price_incl_tax = excl_total + tax_total
    if isinstance(invoice, Invoice):
        invoice.total_tax = tax_total
        rate = invoice.exchange_rate or Decimal(1)
        invoice.total_price_excl_tax_base = money(excl_total * rate)
        invoice.total_price_incl_tax_base = money(invoice.total_price_incl_tax * rate)
        paid = sum((p.price or Decimal(0) for p in invoice.payments), Decimal(0))
        invoice.total_paid = money(paid)
        invoice.total_unpaid = invoice.total_price_incl_tax - invoice.total_paid


def _known(
    errors: list[FieldError],
    entity: Invoice | RecurringTemplate,
    contacts: set[int],
    tax_rates: Mapping[int, Decimal],
) -> list[FieldError]:
    """`errors` (the client's own checks, which the service made too) and what only the
    service knows: whether the contact and each line's tax rate exist."""
    if entity.contact_id is not None and entity.contact_id not in contacts:
        errors.append(FieldError("contact_id", "does not exist"))
    for line in entity.details:
        if line.tax_rate_id is not None and line.tax_rate_id not in tax_rates and not line.destroy:
            errors.append(FieldError("details.tax_rate_id", "does not exist"))
    return errors


def invoice_errors(
    invoice: Invoice, contacts: set[int], tax_rates: Mapping[int, Decimal]
) -> list[FieldError]:
    return _known(check_invoice(invoice), invoice, contacts, tax_rates)


def template_errors(
    template: RecurringTemplate,
    contacts: set[int],
    tax_rates: Mapping[int, Decimal],
    today: dt.date,
) -> list[FieldError]:
    errors = check_template(template, today=today)
    if template.frequency is None:  # the client lets create leave it out: the fake sets 1
        errors.append(FieldError("frequency", "can't be blank"))
    return _known(errors, template, contacts, tax_rates)


def add_period(day: dt.date, frequency_type: int, frequency: int) -> dt.date:
    """The next run of a template: `frequency` runs per period of `frequency_type`."""
    if frequency_type == 1:
        return day + dt.timedelta(days=max(1, 7 // max(1, frequency)))
    months = {2: 1, 3: 3, 4: 6, 5: 12}.get(frequency_type, 1)
    step_months = max(1, months // max(1, frequency))
    month = day.month - 1 + step_months
    year = day.year + month // 12
    month = month % 12 + 1
    return dt.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


# -- line changes of an update, as Rails' `details_attributes` applies them: the same for
# invoice lines and template lines.

L = TypeVar("L", bound=DetailLine)
E = TypeVar("E", Invoice, RecurringTemplate)


def new_line(line: L, ident: int, now: dt.datetime, **more: Any) -> L:
    """`line` as the service stores a new one: its id and times, price 0 when none, no
    request flag and nothing unknown."""
    price = line.price if line.price is not None else Decimal("0.0")
    return attrs.evolve(
        line, id=ident, price=price, destroy=None, created_at=now, updated_at=now, extra={}, **more
    )


def with_changes(
    entity: E,
    changes: Mapping[str, Any],
    *,
    new_line: Callable[[dict[str, Any]], Any],
    now: dt.datetime,
) -> E:
    """A copy of `entity` (an invoice or a template) with `changes` set; its lines change as
    `_line_changes` says (`new_line` builds an added one)."""
    candidate = attrs.evolve(entity, details=list(entity.details))
    for name, value in changes.items():
        if name == "details":
            value = _line_changes(candidate.details, value or [], new_line=new_line, now=now)
        setattr(candidate, name, value)
    return candidate


def _line_changes(
    lines: list[L],
    changes: Iterable[Mapping[str, Any]],
    *,
    new_line: Callable[[dict[str, Any]], L],
    now: dt.datetime,
) -> list[L]:
    """The lines after `changes`: no id adds a line (`new_line` builds it), an id with
    fields changes that line, an id with `destroy` deletes it. An unknown id is a 422."""
    result = list(lines)
    for change in changes:
        line_id = change.get("id")
        if line_id is None:
            if not change.get("destroy"):
                result.append(new_line(without(change, "id", "destroy")))
            continue
        if not any(line.id == line_id for line in result):
            raise Unprocessable([FieldError("details.id", f"line {line_id} does not exist")])
        if change.get("destroy"):
            result = [line for line in result if line.id != line_id]
            continue
        result = [
            attrs.evolve(line, **without(change, "id", "destroy"), updated_at=now)
            if line.id == line_id
            else line
            for line in result
        ]
    return result
