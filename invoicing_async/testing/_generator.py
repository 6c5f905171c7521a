"""Realistic invoices for an account, reproducible from a seed."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

from invoicing_async.models import Invoice, InvoiceDetail, InvoicePayment
from invoicing_async.testing._account import Account
from invoicing_async.testing._rules import compute_invoice_totals

__all__ = ["populate"]

_COMPANIES = [
    "Acme B.V.",
    "Globex Ltd",
    "Initech",
    "Umbrella GmbH",
    "Hooli",
    "Stark & Zonen",
    "Wayne Enterprises",
    "Café Ñandú",
    "Møller A/S",
    "Zürich Bäckerei",
    "",
    "",
]
_FIRST = ["Anna", "Bram", "Chloé", "Daan", "Eva", "Finn", "Günter", "Hanna"]
_LAST = ["de Vries", "Jansen", "Bakker", "Visser", "Smit", "Müller", "O'Brien"]
_WORK = [
    "Consultancy",
    "Development",
    "Design & layout",
    "Hosting <monthly>",
    "Support",
    "Training",
    "Travel expenses",
    "Licence fee",
    "Workshop €",
    "Maintenance",
]
_AMOUNTS = ["1 x", "2 x", "3 hours", "0.5 days", "10 x", "1", "4 hours"]
_PRICES = [Decimal(p) for p in ("12.50", "60.50", "99.00", "0.99", "1250.00", "75", "33.33")]
_METHODS = ["bank_transfer", "ideal", "paypal", "creditcard", "cash"]


def populate(account: Account, count: int, *, seed: int = 0) -> list[Invoice]:
    """Add `count` invoices (5 lines each; drafts, open, late and paid ones) to `account`,
    from small pools of values, so large accounts stay light."""
    rng = random.Random(seed)
    today = account.clock.today()
    # Never in the future: before 09:00 UTC today's invoices would otherwise be "changed
    # later this second" forever, and every sync would read them again.
    latest = account.clock.now().replace(microsecond=0) - dt.timedelta(minutes=5)
    made: list[Invoice] = []
    for _ in range(count):
        ident = next(account.invoice_ids)
        company = rng.choice(_COMPANIES)
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        # Half recent (many still open), half from the past year (mostly late or paid).
        days_back = rng.randrange(0, 45) if rng.random() < 0.5 else rng.randrange(0, 400)
        invoice_date = today - dt.timedelta(days=days_back)
        created = min(dt.datetime.combine(invoice_date, dt.time(9, 0), dt.timezone.utc), latest)
        details = [
            InvoiceDetail(
                id=next(account.detail_ids),
                invoice_id=ident,
                amount=rng.choice(_AMOUNTS),
                description=rng.choice(_WORK),
                price=rng.choice(_PRICES),
                tax_rate_id=rng.choice((1, 1, 2, 3)),
                row_order=row,
                created_at=created,
                updated_at=created,
            )
            for row in range(5)
        ]
        roll = rng.random()
        state = "draft" if roll < 0.15 else "open"
        invoice = Invoice(
            id=ident,
            contact_id=rng.randrange(1, 101),
            company_name=company or None,
            firstname=first,
            lastname=last,
            contact_name=f"{first} {last}",
            name=company or f"{first} {last}",
            currency="EUR",
            exchange_rate=Decimal("1.0"),
            discount=Decimal("0.0") if rng.random() < 0.8 else Decimal("10.0"),
            due_date_interval=rng.choice((14, 30)),
            language="en",
            prices_are_incl_tax=False,
            show_tax=True,
            invoice_profile_id=1,
            invoice_profile_version_id=1,
            state=state,
            invoice_hash=f"{rng.getrandbits(160):040x}",
            created_at=created,
            details=details,
        )
        account.add_history(invoice, "invoice_created", at=created)
        if state == "open":
            invoice.invoice_id = account.next_invoice_number(invoice_date.year)
            invoice.invoice_date = invoice_date
            invoice.send_method = "email"
            invoice.email = "billing@example.com"
            account.add_history(invoice, "invoice_sent_email", at=created)
        else:
            invoice.concept_id = ident
        compute_invoice_totals(invoice, account.tax_rates)
        if state == "open" and roll > 0.55:
            invoice.payments.append(
                InvoicePayment(
                    id=next(account.record_ids),
                    invoice_id=ident,
                    payment_date=invoice_date + dt.timedelta(days=rng.randrange(1, 20)),
                    payment_method=rng.choice(_METHODS),
                    price=invoice.total_price_incl_tax,
                    created_at=created,
                    updated_at=created,
                )
            )
            compute_invoice_totals(invoice, account.tax_rates)
            invoice.state = "paid"
        elif state == "open":
            due = invoice_date + dt.timedelta(days=invoice.due_date_interval or 0)
            if due < today:
                invoice.state = "late"
            else:
                account.schedule_due(invoice)
        invoice.updated_at = created
        invoice.revision = int(created.timestamp())
        account.invoices[ident] = invoice
        made.append(invoice)
    return made
