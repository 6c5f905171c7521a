"""attrs models of the service's resources (specification part 2), with `FieldError`."""

from invoicing_async._models.base import Model
from invoicing_async._models.enums import (
    FrequencyType,
    HistoryAction,
    InvoiceFilter,
    InvoiceState,
    PaymentMethod,
    SendMethod,
)
from invoicing_async._models.export import details_dataframe, invoices_dataframe, to_jsonable
from invoicing_async._models.invoice import (
    Invoice,
    InvoiceDetail,
    InvoiceHistoryRecord,
    InvoicePayment,
)
from invoicing_async._models.recurring import RecurringTemplate, RecurringTemplateDetail
from invoicing_async._models.session import CurrentSession, SyncEntry, SyncRevisions
from invoicing_async.errors import FieldError

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
    "details_dataframe",
    "invoices_dataframe",
    "to_jsonable",
]
