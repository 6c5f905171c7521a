"""Documented values of the enumerated attributes, as `str`/`int` subclasses (model
fields stay plain, so a value the service adds later still decodes)."""

from __future__ import annotations

from enum import Enum, IntEnum

__all__ = [
    "FrequencyType",
    "HistoryAction",
    "InvoiceFilter",
    "InvoiceState",
    "PaymentMethod",
    "SendMethod",
]


class _StrEnum(str, Enum):
    def __str__(self) -> str:
        return str(self.value)


class InvoiceState(_StrEnum):
    DRAFT = "draft"
    OPEN = "open"
    LATE = "late"
    PAID = "paid"


class SendMethod(_StrEnum):
    EMAIL = "email"
    HAND = "hand"
    POST = "post"


class PaymentMethod(_StrEnum):
    """Methods in the specification, plus the three seen on the wire beyond it."""

    BANK_TRANSFER = "bank_transfer"
    CREDITCARD = "creditcard"
    DIRECT_DEBIT = "direct_debit"
    IDEAL = "ideal"
    PAYPAL = "paypal"
    PIN = "pin"
    CASH = "cash"
    CREDIT_INVOICE = "credit_invoice"
    REVERSAL = "reversal"


class HistoryAction(_StrEnum):
    """`action` of a history record; an empty action marks a note."""

    NOTE = ""
    INVOICE_CREATED = "invoice_created"
    INVOICE_PAID = "invoice_paid"
    INVOICE_PAID_MAIL_SENT = "invoice_paid_mail_sent"
    INVOICE_REMINDER_SENT = "invoice_reminder_sent"
    INVOICE_REMINDER_SENT_EMAIL = "invoice_reminder_sent_email"
    INVOICE_REMINDER_SENT_HAND = "invoice_reminder_sent_hand"
    INVOICE_REMINDER_SENT_POST = "invoice_reminder_sent_post"
    INVOICE_SENT = "invoice_sent"
    INVOICE_SENT_EMAIL = "invoice_sent_email"
    INVOICE_SENT_HAND = "invoice_sent_hand"
    INVOICE_SENT_POST = "invoice_sent_post"


class FrequencyType(IntEnum):
    WEEKLY = 1
    MONTHLY = 2
    QUARTERLY = 3
    HALF_YEARLY = 4
    YEARLY = 5

    def __str__(self) -> str:  # "2", as on Python 3.11+ (3.10 says "FrequencyType.MONTHLY")
        return str(self.value)


class InvoiceFilter(_StrEnum):
    """Named filters of the specification, plus those seen beyond it."""

    ALL = "all"
    DRAFT = "draft"
    LAST_MONTH = "last_month"
    LAST_QUARTER = "last_quarter"
    OPEN = "open"
    SENT = "sent"
    THIS_MONTH = "this_month"
    THIS_QUARTER = "this_quarter"
    THIS_YEAR = "this_year"
    LAST_YEAR = "last_year"
    LATE = "late"
    PAID = "paid"
