"""invoicing-async: an asyncio client for the Invoicing Service API v1.0 (public: the names
below and those of `models`, `errors`, `sync` and `testing`; `_`-modules are private)."""

from invoicing_async import _logs
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
from invoicing_async.errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BudgetUnavailableError,
    ClientClosedError,
    ConfigurationError,
    DecodeError,
    EventLoopError,
    FieldError,
    ForbiddenError,
    HTTPStatusError,
    InsecureTransportError,
    InvoicingError,
    NotAcceptableError,
    NotFoundError,
    NotImplementedByServerError,
    RateLimitExceeded,
    RedirectError,
    ResponseTooLargeError,
    ServerError,
    StoreError,
    ValidationError,
)

__all__ = [
    "APIConnectionError",
    "APIResponse",
    "APITimeoutError",
    "Auth",
    "AuthenticationError",
    "BasicAuth",
    "BudgetSnapshot",
    "BudgetUnavailableError",
    "ClientClosedError",
    "ConfigurationError",
    "DecodeError",
    "EventLoopError",
    "FieldError",
    "ForbiddenError",
    "Format",
    "HTTPStatusError",
    "InsecureTransportError",
    "InvoicingClient",
    "InvoicingError",
    "NotAcceptableError",
    "NotFoundError",
    "NotImplementedByServerError",
    "OAuth1Auth",
    "OutgoingRequest",
    "RateBudget",
    "RateLimitExceeded",
    "RawResponse",
    "RedirectError",
    "RequestEvent",
    "ResponseTooLargeError",
    "RetryPolicy",
    "SendError",
    "Sender",
    "ServerError",
    "StoreError",
    "ValidationError",
    "__version__",
]

_logs.configure_from_env()  # INVOICING_LOG=debug|info|warning: the package's log, no code
