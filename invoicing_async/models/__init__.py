"""attrs models of the service's resources, and the converter between them and the wire."""

from invoicing_async.errors import FieldError
from invoicing_async.models.base import Model
from invoicing_async.models.enums import (
    FrequencyType,
    HistoryAction,
    InvoiceFilter,
    InvoiceState,
    PaymentMethod,
    SendMethod,
)
from invoicing_async.models.invoice import (
    Invoice,
    InvoiceDetail,
    InvoiceHistoryRecord,
    InvoicePayment,
)
from invoicing_async.models.recurring import RecurringTemplate, RecurringTemplateDetail
from invoicing_async.models.session import CurrentSession, SyncEntry, SyncRevisions

__all__ = [
    "CurrentSession",
    "FieldError",
    "FrequencyType",
    "HistoryAction",
    "Invoice",
    "InvoiceDetail",
    "InvoiceFilter",
    "InvoiceHistoryRecord",
    "InvoicePayment",
    "InvoiceState",
    "Model",
    "PaymentMethod",
    "RecurringTemplate",
    "RecurringTemplateDetail",
    "SendMethod",
    "SyncEntry",
    "SyncRevisions",
]
