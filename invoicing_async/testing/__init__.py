"""An in-process fake of the Invoicing Service, for tests, the demo and benchmarks."""

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
    "mock_response",
    "populate",
]
