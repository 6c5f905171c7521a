"""The sync engine and its stores: a local copy of an account's invoices, kept current."""

from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._push.receiver import PushReceiver, follow_pushes
from invoicing_async._sync.engine import SyncEngine
from invoicing_async._sync.memory import MemoryStore
from invoicing_async._sync.postgres import PostgresStore
from invoicing_async._sync.report import BatchCommitted, SyncProgress, SyncReport
from invoicing_async._sync.sqlite import SQLiteStore
from invoicing_async._sync.store import BatchResult, PendingEntry, Store, store_dataframes

__all__ = [
    "BatchCommitted",
    "BatchResult",
    "InvoiceDocument",
    "MemoryStore",
    "PendingEntry",
    "PostgresStore",
    "PushReceiver",
    "SQLiteStore",
    "Store",
    "SyncEngine",
    "SyncProgress",
    "SyncReport",
    "follow_pushes",
    "store_dataframes",
]
