"""The sync engine and its stores: a local copy of an account's invoices, kept current."""

from invoicing_async.sync.engine import BatchCommitted, SyncEngine, SyncProgress, SyncReport
from invoicing_async.sync.memory import MemoryStore
from invoicing_async.sync.plan import BATCH_SIZE, SyncPlan, plan_sync
from invoicing_async.sync.sqlite import SQLiteStore
from invoicing_async.sync.store import BatchResult, PendingEntry, Store

__all__ = [
    "BATCH_SIZE",
    "BatchCommitted",
    "BatchResult",
    "MemoryStore",
    "PendingEntry",
    "SQLiteStore",
    "Store",
    "SyncEngine",
    "SyncPlan",
    "SyncProgress",
    "SyncReport",
    "plan_sync",
]
