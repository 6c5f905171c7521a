"""One account of the fake service: its invoices, templates, counters, rules and the faults
it injects."""

from __future__ import annotations

import asyncio
import datetime as dt
import heapq
import itertools
import random
import secrets
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

import attrs

from invoicing_async._models.fields import Format
from invoicing_async.errors import FieldError
from invoicing_async.models import (
    CurrentSession,
    Invoice,
    InvoiceDetail,
    InvoiceHistoryRecord,
    InvoicePayment,
    RecurringTemplate,
    RecurringTemplateDetail,
    SyncEntry,
)
from invoicing_async.testing._clock import FakeClock
from invoicing_async.testing._documents import DocumentAllowance, InvoiceDocuments
from invoicing_async.testing._ratelimit import RequestWindow, WindowRule
from invoicing_async.testing._real_shape import as_read
from invoicing_async.testing._rules import (
    DEFAULT_TAX_RATES,
    Missing,
    Unprocessable,
    add_period,
    compute_invoice_totals,
    invoice_errors,
    new_line,
    template_errors,
    with_changes,
)

__all__ = ["Account", "FaultPlan", "PushEvent", "RecordedRequest"]

SEND_METHODS = ("email", "hand", "post")
# The email text of the account's invoice profile, used when a send leaves it out.
PROFILE_INVOICE_TEXT = "Dear customer, please find our invoice attached."


@attrs.define
class FaultPlan:
    """What goes wrong, and how often. Rates are probabilities per request (0 to 1).

    - `latency`: seconds added to every response.
    - `error_rate`: answer 500. `drop_rate`: close the connection without answering.
    - `timeout_rate`: hold the response for `timeout_delay` seconds (past the client's timeout).
    - `truncate_rate`: promise a body and send only half of it.
    - `missing_ids`: ids the sync list shows but sync fetch never returns.
    - `mutate_after_list`: after each sync list, this many listed invoices change
      (new revision) before the client fetches them.
    - `budget_cut_after`: after this many requests, every request gets the 403 of a
      spent budget (the hourly window cut short).
    - `only_paths`: when set, faults hit only paths containing one of these strings.
    - `gate`: when set, responses wait until this event is set (counted as `gated`), so a
      test holds a run mid-flight until it has done what it must (kill a database, say).
    - `applied_drop_rate`, `applied_error_rate`, `applied_timeout_rate`: a write (create,
      send, reminder, payment, template create) is applied, then its connection is closed
      unanswered, it is answered 500, or held for `timeout_delay` seconds.
    """

    latency: float = 0.0
    error_rate: float = 0.0
    drop_rate: float = 0.0
    timeout_rate: float = 0.0
    timeout_delay: float = 120.0
    truncate_rate: float = 0.0
    missing_ids: set[int] = attrs.field(factory=set)
    mutate_after_list: int = 0
    budget_cut_after: int | None = None
    only_paths: tuple[str, ...] = ()
    gate: asyncio.Event | None = None
    applied_drop_rate: float = 0.0
    applied_error_rate: float = 0.0
    applied_timeout_rate: float = 0.0
    seed: int = 0
    rng: random.Random = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def applies_to(self, path: str) -> bool:
        return not self.only_paths or any(p in path for p in self.only_paths)

    def roll(self, rate: float) -> bool:
        return rate > 0 and self.rng.random() < rate


@attrs.frozen
class RecordedRequest:
    """What the client sent (the Authorization header is not kept) and what it got."""

    account: str | None
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int
    at: float


@attrs.frozen
class PushEvent:
    invoice_id: int
    state: str


class Account:
    """An account's data and the operations of the API on it."""

    def __init__(
        self,
        name: str,
        *,
        username: str,
        password: str,
        clock: FakeClock,
        limit: int = 350,
        period: float = 3600.0,
        window_rule: WindowRule = "fixed",
        contacts: Iterable[int] = range(1, 101),
        tax_rates: Mapping[int, Decimal] | None = None,
        push_url: str | None = None,
        user_id: int = 1,
        documents: DocumentAllowance | None = None,
        real_shape: bool = True,
    ) -> None:
        self.name = name
        self.username = username
        self.password = password
        self.clock = clock
        self.window = RequestWindow(clock.monotonic, limit=limit, period=period, rule=window_rule)
        self.contacts = set(contacts)
        self.tax_rates = dict(tax_rates or DEFAULT_TAX_RATES)
        self.push_url = push_url
        self.user_id = user_id
        self.faults = FaultPlan()
        self.invoices: dict[int, Invoice] = {}
        # Encoded invoices (`_touch` makes them stale), in the real service's shape or not.
        self.documents = InvoiceDocuments(documents, real_shape=real_shape)
        self.templates: dict[int, RecurringTemplate] = {}
        self.requests: list[RecordedRequest] = []
        self.counters: Counter[str] = Counter()
        self.pushes: list[PushEvent] = []
        self.on_state_change: Callable[[Account, PushEvent], None] | None = None
        self.record_bodies = True
        # The next ids of invoices, lines, records (history and payments) and templates.
        self.invoice_ids = itertools.count(1)
        self.detail_ids = itertools.count(1)
        self.record_ids = itertools.count(1)
        self.template_ids = itertools.count(1)
        self._sequences: Counter[int] = Counter()
        self._due: list[tuple[dt.date, int]] = []  # (due date, invoice id) of open invoices
        self.requests_total = 0
        self.in_flight = 0  # requests being handled now (a dead client's may still be)
        # What the account applied, to count duplicates on the service: invoices created per
        # po_number, sends and reminders per invoice, payments per invoice.
        self.created_per_marker: Counter[str] = Counter()
        self.sends_per_invoice: Counter[int] = Counter()
        self.reminders_per_invoice: Counter[int] = Counter()
        self.payments_per_invoice: Counter[int] = Counter()

    def session(self) -> CurrentSession:
        return CurrentSession(
            id=self.user_id,
            email=f"{self.username}@example.com",
            name=self.username.replace("-", " ").title(),
            language="en",
            time_zone="Europe/Amsterdam",
            extra={"account": self.name},
        )

    def _touch(self, invoice: Invoice) -> None:
        """A change: new updated_at and a revision that only grows (Unix seconds)."""
        now = self.clock.now().replace(microsecond=0)
        invoice.updated_at = now
        invoice.revision = max(int(now.timestamp()), (invoice.revision or 0) + 1)
        self.documents.changed(invoice.id)

    def add_history(self, invoice: Invoice, action: str, *, at: dt.datetime | None = None) -> None:
        """A history record of `action` on the invoice, made `at` (now when not given)."""
        at = at or self.clock.now().replace(microsecond=0)
        invoice.history.append(
            InvoiceHistoryRecord(
                id=next(self.record_ids),
                invoice_id=invoice.id,
                user_id=self.user_id,
                action=action,
                created_at=at,
                updated_at=at,
            )
        )

    def _set_state(self, invoice: Invoice, state: str) -> None:
        if invoice.state == state:
            return
        invoice.state = state
        event = PushEvent(invoice_id=invoice.id or 0, state=state)
        self.pushes.append(event)
        if self.on_state_change is not None:
            self.on_state_change(self, event)

    def next_invoice_number(self, year: int) -> str:
        """`2014-0096`: the next number of the year's sequence, as sending assigns it."""
        self._sequences[year] += 1
        return f"{year}-{self._sequences[year]:04d}"

    def schedule_due(self, invoice: Invoice) -> None:
        """Have an open invoice turn late once its due date has passed."""
        if invoice.invoice_date is not None and invoice.id is not None:
            due = invoice.invoice_date + dt.timedelta(days=invoice.due_date_interval or 0)
            heapq.heappush(self._due, (due, invoice.id))

    def refresh(self) -> None:
        """Open invoices past their due date become late (as the service's daily run does)."""
        today = self.clock.today()
        while self._due and self._due[0][0] < today:
            _due, ident = heapq.heappop(self._due)
            invoice = self.invoices.get(ident)
            if invoice is not None and invoice.state == "open":
                self._set_state(invoice, "late")
                self._touch(invoice)

    def as_read(self, invoice: Invoice, fmt: Format) -> Invoice:
        """`invoice` as a client reads it from this account in `fmt`: in the real shape,
        with the fields beyond the specification in `extra` (what a test compares a
        synced or fetched copy with)."""
        return as_read(invoice, fmt) if self.documents.real_shape else invoice

    def get_invoice(self, ident: int) -> Invoice:
        """The invoice with this id; `Missing` (a 404) when there is none."""
        invoice = self.invoices.get(ident)
        if invoice is None:
            raise Missing(f"invoice {ident}")
        return invoice

    def _recompute(self, invoice: Invoice) -> None:
        compute_invoice_totals(invoice, self.tax_rates)
        if invoice.invoice_date is not None:
            invoice.days_open = (self.clock.today() - invoice.invoice_date).days

    def create_invoice(self, data: Invoice) -> Invoice:
        errors = invoice_errors(data, self.contacts, self.tax_rates)
        if errors:
            raise Unprocessable(errors)
        now = self.clock.now().replace(microsecond=0)
        ident = next(self.invoice_ids)
        invoice = attrs.evolve(
            data,
            id=ident,
            concept_id=ident,
            state="draft",
            invoice_id=data.invoice_id,
            currency=data.currency or "EUR",
            exchange_rate=Decimal("1.0"),
            discount=data.discount if data.discount is not None else Decimal("0.0"),
            due_date_interval=data.due_date_interval if data.due_date_interval is not None else 14,
            language=data.language or "en",
            prices_are_incl_tax=bool(data.prices_are_incl_tax),
            show_tax=data.show_tax if data.show_tax is not None else True,
            invoice_hash=secrets.token_hex(20),
            invoice_profile_id=data.invoice_profile_id or 1,
            invoice_profile_version_id=1,
            created_at=now,
            history=[],
            payments=[],
            details=[],
            extra={},
        )
        invoice.name = invoice.company_name or _full_name(invoice)
        invoice.contact_name = _full_name(invoice)
        invoice.url = f"https://fake.invalid/invoice/{invoice.invoice_hash}"
        for line in data.details:
            if not line.destroy:
                invoice.details.append(self._new_detail(ident, line))
        self._touch(invoice)
        self.add_history(invoice, "invoice_created")
        self._recompute(invoice)
        self.invoices[ident] = invoice
        if invoice.po_number is not None:
            self.created_per_marker[invoice.po_number] += 1
        return invoice

    def _new_detail(self, invoice_id: int, line: InvoiceDetail) -> InvoiceDetail:
        now = self.clock.now().replace(microsecond=0)
        return new_line(line, next(self.detail_ids), now, invoice_id=invoice_id)

    def update_invoice(self, ident: int, changes: Mapping[str, Any]) -> Invoice:
        candidate = with_changes(
            self.get_invoice(ident),
            changes,
            new_line=lambda fields: self._new_detail(ident, InvoiceDetail(**fields)),
            now=self.clock.now().replace(microsecond=0),
        )
        errors = invoice_errors(candidate, self.contacts, self.tax_rates)
        if errors:
            raise Unprocessable(errors)
        self._touch(candidate)
        self._recompute(candidate)
        self.invoices[ident] = candidate
        return candidate

    def contact_email(self, invoice: Invoice) -> str:
        """The address of the invoice's contact (the fake's contacts have made-up ones)."""
        if invoice.contact_id is not None:
            return f"contact-{invoice.contact_id}@example.com"
        return invoice.email or f"invoice-{invoice.id}@example.com"

    def send_invoice(self, ident: int, payload: Mapping[str, Any], *, reminder: bool) -> Invoice:
        """Send or remind; only the method is required (the service fills in the contact's address
        and the profile's text)."""
        invoice = self.get_invoice(ident)
        errors = []
        method = payload.get("send_method")
        if not method:
            errors.append(FieldError("send_method", "can't be blank"))
        elif method not in SEND_METHODS:
            errors.append(FieldError("send_method", "is not included in the list"))
        if reminder and invoice.state not in ("open", "late"):
            errors.append(FieldError("state", "a reminder needs an open or late invoice"))
        if errors:
            raise Unprocessable(errors)
        invoice.email = payload.get("email") or self.contact_email(invoice)
        if reminder:
            self.reminders_per_invoice[ident] += 1
            self.add_history(invoice, f"invoice_reminder_sent_{method}")
        else:
            self.sends_per_invoice[ident] += 1
            invoice.send_method = method
            invoice.invoice_email = payload.get("invoice_email") or PROFILE_INVOICE_TEXT
            today = self.clock.today()
            if invoice.invoice_date is None:
                invoice.invoice_date = today
            if invoice.invoice_id is None:
                invoice.invoice_id = self.next_invoice_number(invoice.invoice_date.year)
            invoice.concept_id = None
            self.add_history(invoice, f"invoice_sent_{method}")
            if invoice.state == "draft":
                self._set_state(invoice, "open")
                self.schedule_due(invoice)
                self._recompute(invoice)
                if invoice.total_unpaid is not None and invoice.total_unpaid == 0:
                    self._set_state(invoice, "paid")
        self._touch(invoice)
        self._recompute(invoice)
        self.refresh()
        return invoice

    def register_payment(self, ident: int, payment: InvoicePayment) -> Invoice:
        """Add the payment; the invoice is paid when covered exactly. Returns the invoice."""
        invoice = self.get_invoice(ident)
        errors = []
        if payment.price is None:
            errors.append(FieldError("price", "can't be blank"))
        if payment.payment_method is None:
            errors.append(FieldError("payment_method", "can't be blank"))
        if errors:
            raise Unprocessable(errors)
        now = self.clock.now().replace(microsecond=0)
        stored = attrs.evolve(
            payment,
            id=next(self.record_ids),
            invoice_id=ident,
            payment_date=payment.payment_date or self.clock.today(),
            send_email=None,
            created_at=now,
            updated_at=now,
            extra={},
        )
        invoice.payments.append(stored)
        self.payments_per_invoice[ident] += 1
        self._recompute(invoice)
        # Covered exactly: paid. Overpaid: stays open with a negative total_unpaid, as
        # the real service did (field notes).
        if invoice.state in ("open", "late") and invoice.total_unpaid == 0:
            self._set_state(invoice, "paid")
            self.add_history(invoice, "invoice_paid")
        self._touch(invoice)
        return invoice

    def delete_invoice(self, ident: int) -> None:
        self.get_invoice(ident)
        del self.invoices[ident]
        self.documents.forget(ident)

    def list_invoices(self, filter_name: str | None = None) -> list[Invoice]:
        invoices = list(self.invoices.values())
        if filter_name is None or filter_name == "all":
            return invoices
        today = self.clock.today()
        states = {
            "draft": ("draft",),
            "open": ("open", "late"),
            "late": ("late",),
            "paid": ("paid",),
            "sent": ("open", "late", "paid"),  # every state but draft
        }
        if filter_name in states:
            return [i for i in invoices if i.state in states[filter_name]]
        ranges = _date_ranges(today)
        if filter_name in ranges:
            start, end = ranges[filter_name]
            return [i for i in invoices if i.invoice_date and start <= i.invoice_date <= end]
        if filter_name.isdigit():
            return invoices  # saved filters: the fake has one, matching everything
        raise Missing(f"filter {filter_name}")

    def advanced_filter(self, params: Mapping[str, Any]) -> list[Invoice]:
        """Equality on any invoice attribute given (`state`, `contact_id`, …)."""
        return [
            invoice
            for invoice in self.invoices.values()
            if all(str(getattr(invoice, k, None)) == str(v) for k, v in params.items())
        ]

    def sync_list(self) -> list[SyncEntry]:
        return [SyncEntry(id=i, revision=inv.revision or 0) for i, inv in self.invoices.items()]

    def sync_fetch(self, ids: Iterable[int]) -> list[Invoice]:
        found: list[Invoice] = []
        for ident in ids:
            if len(found) == 100:
                break  # at most 100 invoices per response; extra ids are ignored
            if ident in self.faults.missing_ids:
                self.counters["missing"] += 1
                continue
            invoice = self.invoices.get(ident)
            if invoice is not None:
                found.append(invoice)
        return found

    def mutate(self, ident: int) -> None:
        """Change an invoice as another user would (new revision), for race tests."""
        invoice = self.get_invoice(ident)
        invoice.po_number = f"changed-{(invoice.revision or 0) + 1}"
        self._touch(invoice)

    # -- recurring templates (specification part 4.2)

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


def _full_name(invoice: Invoice) -> str | None:
    name = " ".join(n for n in (invoice.firstname, invoice.lastname) if n)
    return name or None


def _date_ranges(today: dt.date) -> dict[str, tuple[dt.date, dt.date]]:
    month_start = today.replace(day=1)
    last_month_end = month_start - dt.timedelta(days=1)
    quarter_month = 3 * ((today.month - 1) // 3) + 1
    quarter_start = today.replace(month=quarter_month, day=1)
    last_quarter_end = quarter_start - dt.timedelta(days=1)
    lq_month = 3 * ((last_quarter_end.month - 1) // 3) + 1
    return {
        "this_month": (month_start, today),
        "last_month": (last_month_end.replace(day=1), last_month_end),
        "this_quarter": (quarter_start, today),
        "last_quarter": (last_quarter_end.replace(month=lq_month, day=1), last_quarter_end),
        "this_year": (today.replace(month=1, day=1), today),
        "last_year": (dt.date(today.year - 1, 1, 1), dt.date(today.year - 1, 12, 31)),
    }
