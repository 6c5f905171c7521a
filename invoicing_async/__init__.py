"""invoicing-async: an asyncio client for the Invoicing Service API v1.0."""

from invoicing_async._version import __version__
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

__all__ = [
    "APIConnectionError",
    "APITimeoutError",
    "AuthenticationError",
    "DecodeError",
    "FieldError",
    "ForbiddenError",
    "HTTPStatusError",
    "InsecureTransportError",
    "InvoicingError",
    "NotAcceptableError",
    "NotFoundError",
    "NotImplementedByServerError",
    "RateLimitExceeded",
    "RedirectError",
    "ServerError",
    "ValidationError",
    "__version__",
]
