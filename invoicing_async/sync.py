"""The sync engine and its stores: a local copy of an account's invoices, kept current."""

from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._push.receiver import PushReceiver, follow_pushes
from invoicing_async._sync.engine import SyncEngine
from invoicing_async._sync.frames import store_dataframes
from invoicing_async._sync.memory import MemoryStore
from invoicing_async._sync.plan import BATCH_SIZE, SyncPlan, plan_sync
from invoicing_async._sync.postgres import PostgresStore
from invoicing_async._sync.report import BatchCommitted, SyncProgress, SyncReport
from invoicing_async._sync.sqlite import SQLiteStore
from invoicing_async._sync.store import BatchResult, DocumentStore, PendingEntry, Store

__all__ = [
    "BATCH_SIZE",
    "BatchCommitted",
    "BatchResult",
    "DocumentStore",
    "InvoiceDocument",
    "MemoryStore",
    "PendingEntry",
    "PostgresStore",
    "PushReceiver",
    "SQLiteStore",
    "Store",
    "SyncEngine",
    "SyncPlan",
    "SyncProgress",
    "SyncReport",
    "follow_pushes",
    "plan_sync",
    "store_dataframes",
]
