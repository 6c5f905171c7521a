"""invoicing-async: an asyncio client for the Invoicing Service API v1.0."""

from invoicing_async._version import __version__
from invoicing_async.client import InvoicingClient
from invoicing_async.errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    DecodeError,
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
    ServerError,
    ValidationError,
)
from invoicing_async.transport import (
    BasicAuth,
    BudgetSnapshot,
    OAuth1Auth,
    RateBudget,
    RequestEvent,
    RetryPolicy,
)

__all__ = [
    "APIConnectionError",
    "APITimeoutError",
    "AuthenticationError",
    "BasicAuth",
    "BudgetSnapshot",
    "DecodeError",
    "FieldError",
    "ForbiddenError",
    "HTTPStatusError",
    "InsecureTransportError",
    "InvoicingClient",
    "InvoicingError",
    "NotAcceptableError",
    "NotFoundError",
    "NotImplementedByServerError",
    "OAuth1Auth",
    "RateBudget",
    "RateLimitExceeded",
    "RedirectError",
    "RequestEvent",
    "RetryPolicy",
    "ServerError",
    "ValidationError",
    "__version__",
]
