"""The recurring-template operations of a fake account (specification part 4.2)."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import attrs

from invoicing_async.models import (
    Invoice,
    InvoiceDetail,
    RecurringTemplate,
    RecurringTemplateDetail,
)
from invoicing_async.testing._clock import FakeClock
from invoicing_async.testing._documents import InvoiceDocuments
from invoicing_async.testing._lines import new_line, with_changes
from invoicing_async.testing._rules import (
    Missing,
    Unprocessable,
    add_period,
    compute_invoice_totals,
    template_errors,
)

__all__ = ["TemplateOperations"]


class TemplateOperations:
    """Create, read, update, delete and run recurring templates; mixed into `Account`."""

    clock: FakeClock
    contacts: set[int]
    tax_rates: dict[int, Decimal]
    templates: dict[int, RecurringTemplate]
    documents: InvoiceDocuments
    template_ids: itertools.count[int]
    detail_ids: itertools.count[int]
    create_invoice: Callable[[Invoice], Invoice]  # the account's own, used by run_templates

    def create_template(self, data: RecurringTemplate) -> RecurringTemplate:
        if data.frequency is None:  # the service took a template without one (field notes)
            data = attrs.evolve(data, frequency=1)
        errors = template_errors(data, self.contacts, self.tax_rates, self.clock.today())
        if errors:
            raise Unprocessable(errors)
        now = self.clock.now().replace(microsecond=0)
        start = data.start_date or self.clock.today() + dt.timedelta(days=1)
        template = attrs.evolve(
            data,
            id=next(self.template_ids),
            active=True,
            currency=data.currency or "EUR",
            discount=data.discount if data.discount is not None else Decimal("0.0"),
            occurences=data.occurences or 0,
            number_of_occurences=0,
            send_invoice=bool(data.send_invoice),
            start_date=start,
            next_date=start,
            invoice_profile_id=data.invoice_profile_id or 1,
            created_at=now,
            updated_at=now,
            details=[
                new_line(d, next(self.detail_ids), now) for d in data.details if not d.destroy
            ],
            extra={},
        )
        compute_invoice_totals(template, self.tax_rates)
        self.templates[template.id or 0] = template
        return template

    def get_template(self, ident: int) -> RecurringTemplate:
        template = self.templates.get(ident)
        if template is None:
            raise Missing(f"recurring template {ident}")
        return template

    def update_template(self, ident: int, changes: Mapping[str, Any]) -> RecurringTemplate:
        candidate = with_changes(
            self.get_template(ident),
            changes,
            new_line=lambda fields: RecurringTemplateDetail(id=next(self.detail_ids), **fields),
            now=self.clock.now().replace(microsecond=0),
        )
        errors = template_errors(candidate, self.contacts, self.tax_rates, self.clock.today())
        if "start_date" not in changes:
            errors = [e for e in errors if e.attribute != "start_date"]
        if errors:
            raise Unprocessable(errors)
        candidate.updated_at = self.clock.now().replace(microsecond=0)
        if candidate.start_date and candidate.next_date and "start_date" in changes:
            candidate.next_date = candidate.start_date
        compute_invoice_totals(candidate, self.tax_rates)
        self.templates[ident] = candidate
        return candidate

    def delete_template(self, ident: int) -> None:
        self.get_template(ident)
        del self.templates[ident]

    def run_templates(self) -> list[Invoice]:
        """Generate the invoices of templates whose next date has come (for tests)."""
        made = []
        today = self.clock.today()
        for template in self.templates.values():
            while template.active and template.next_date and template.next_date <= today:
                invoice = self.create_invoice(
                    Invoice(
                        contact_id=template.contact_id,
                        currency=template.currency,
                        discount=template.discount,
                        details=[
                            InvoiceDetail(
                                amount=d.amount,
                                description=d.description,
                                price=d.price,
                                tax_rate_id=d.tax_rate_id,
                            )
                            for d in template.details
                        ],
                    )
                )
                invoice.recurring_template_id = template.id
                self.documents.changed(invoice.id)
                made.append(invoice)
                template.number_of_occurences = (template.number_of_occurences or 0) + 1
                template.last_date = template.next_date
                template.next_date = add_period(
                    template.next_date, template.frequency_type or 2, template.frequency or 1
                )
                if template.occurences and template.number_of_occurences >= template.occurences:
                    template.active = False
        return made
