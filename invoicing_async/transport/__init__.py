"""Transport: the session wrapper (auth, rate budget, retries, redirects, error mapping)."""

from invoicing_async.transport.auth import Auth, BasicAuth, OAuth1Auth
from invoicing_async.transport.budget import BudgetSnapshot, RateBudget
from invoicing_async.transport.http import HTTPTransport, RequestEvent
from invoicing_async.transport.response import Response
from invoicing_async.transport.retry import RetryPolicy

__all__ = [
    "Auth",
    "BasicAuth",
    "BudgetSnapshot",
    "HTTPTransport",
    "OAuth1Auth",
    "RateBudget",
    "RequestEvent",
    "Response",
    "RetryPolicy",
]
