"""Resource clients: one class per resource of the specification, returning models."""

from invoicing_async.resources.invoices import InvoicesResource
from invoicing_async.resources.recurring_templates import RecurringTemplatesResource

__all__ = ["InvoicesResource", "RecurringTemplatesResource"]
