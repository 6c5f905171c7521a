"""The sync engine and its stores: a local copy of an account's invoices, kept current."""

from invoicing_async._models.documents import MemberError
from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._push.receiver import PushReceiver, follow_pushes
from invoicing_async._resources.invoices import FetchedBatch
from invoicing_async._sync.engine import SyncEngine
from invoicing_async._sync.frames import store_dataframes
from invoicing_async._sync.memory import MemoryStore
from invoicing_async._sync.plan import BATCH_SIZE, SyncPlan, plan_sync
from invoicing_async._sync.postgres import PostgresStore
from invoicing_async._sync.report import BatchCommitted, SyncProgress, SyncReport
from invoicing_async._sync.source import InvoiceSource, SyncClient
from invoicing_async._sync.sqlite import SQLiteStore
from invoicing_async._sync.store import (
    BatchResult,
    PendingEntry,
    Store,
    WriteOutcome,
    write_outcome,
)

__all__ = [
    "BATCH_SIZE",
    "BatchCommitted",
    "BatchResult",
    "FetchedBatch",
    "InvoiceDocument",
    "InvoiceSource",
    "MemberError",
    "MemoryStore",
    "PendingEntry",
    "PostgresStore",
    "PushReceiver",
    "SQLiteStore",
    "Store",
    "SyncClient",
    "SyncEngine",
    "SyncPlan",
    "SyncProgress",
    "SyncReport",
    "WriteOutcome",
    "follow_pushes",
    "plan_sync",
    "store_dataframes",
    "write_outcome",
]
