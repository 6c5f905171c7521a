"""An in-process fake of the Invoicing Service, for tests, the demo and benchmarks."""

from invoicing_async.testing.account import Account, PushEvent, RecordedRequest
from invoicing_async.testing.clock import FakeClock
from invoicing_async.testing.faults import FaultPlan
from invoicing_async.testing.generator import populate
from invoicing_async.testing.service import FakeInvoicingService

__all__ = [
    "Account",
    "FakeClock",
    "FakeInvoicingService",
    "FaultPlan",
    "PushEvent",
    "RecordedRequest",
    "populate",
]
