"""An in-process fake of the Invoicing Service, for tests, the demo and benchmarks; and
`StoreSuite`, the `Store` conformance suite (imported on first use: it needs pytest and
Hypothesis, the `testing` extra)."""

from typing import TYPE_CHECKING, Any

from invoicing_async._transport.failures import SendError
from invoicing_async._transport.sender import OutgoingRequest, RawResponse
from invoicing_async.testing._account import Account, FaultPlan, PushEvent, RecordedRequest
from invoicing_async.testing._clock import FakeClock
from invoicing_async.testing._generator import populate
from invoicing_async.testing._mock import MockSender, mock_response
from invoicing_async.testing._service import FakeInvoicingService

__all__ = [
    "Account",
    "FakeClock",
    "FakeInvoicingService",
    "FaultPlan",
    "MockSender",
    "OutgoingRequest",
    "PushEvent",
    "RawResponse",
    "RecordedRequest",
    "SendError",
    "StoreSuite",
    "mock_response",
    "populate",
]

if TYPE_CHECKING:
    from invoicing_async.testing._store_suite import StoreSuite


def __getattr__(name: str) -> Any:
    if name == "StoreSuite":
        from invoicing_async.testing._store_suite import StoreSuite

        return StoreSuite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
