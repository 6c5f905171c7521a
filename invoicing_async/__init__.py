"""invoicing-async: an asyncio client for the Invoicing Service API v1.0 (public: the names
below and those of `models`, `errors`, `sync` and `testing`; `_`-modules are private)."""

from invoicing_async import _logs, errors
from invoicing_async._blocking import BlockingInvoicingClient
from invoicing_async._budget.budget import BudgetSnapshot, RateBudget
from invoicing_async._client import InvoicingClient
from invoicing_async._models.payloads import Format
from invoicing_async._resources.raw import APIResponse
from invoicing_async._transport.auth import Auth, BasicAuth, OAuth1Auth
from invoicing_async._transport.failures import SendError
from invoicing_async._transport.http import RequestEvent
from invoicing_async._transport.retry import RetryPolicy
from invoicing_async._transport.sender import OutgoingRequest, RawResponse, Sender
from invoicing_async._version import __version__
from invoicing_async.errors import *  # noqa: F403 (every error is importable from here too)

__all__ = [
    "APIResponse",
    "Auth",
    "BasicAuth",
    "BlockingInvoicingClient",
    "BudgetSnapshot",
    "Format",
    "InvoicingClient",
    "OAuth1Auth",
    "OutgoingRequest",
    "RateBudget",
    "RawResponse",
    "RequestEvent",
    "RetryPolicy",
    "SendError",
    "Sender",
    "__version__",
]
__all__ += errors.__all__

_logs.configure_from_env()  # INVOICING_LOG=debug|info|warning: the package's log, no code
