"""attrs models of the service's resources (specification part 2), with `FieldError`."""

from typing import TYPE_CHECKING

from invoicing_async._models import export as _export
from invoicing_async._models.base import Model
from invoicing_async._models.enums import (
    FrequencyType,
    HistoryAction,
    InvoiceFilter,
    InvoiceState,
    PaymentMethod,
    SendMethod,
)
from invoicing_async._models.export import to_jsonable
from invoicing_async._models.invoice import (
    Invoice,
    InvoiceDetail,
    InvoiceHistoryRecord,
    InvoicePayment,
)
from invoicing_async._models.recurring import RecurringTemplate, RecurringTemplateDetail
from invoicing_async._models.session import CurrentSession, SyncEntry, SyncRevisions
from invoicing_async._text import moved_name as _moved_name
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
    "to_jsonable",
]

if not TYPE_CHECKING:  # type checkers see only the names above

    def __getattr__(name: str) -> object:
        frames = {
            "invoices_dataframe": _export.invoices_dataframe,
            "details_dataframe": _export.details_dataframe,
        }
        return _moved_name(__name__, name, frames, "invoicing_async.contrib.pandas")
