"""The sync engine and its stores: a local copy of an account's invoices, kept current."""

from typing import TYPE_CHECKING

from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._push.receiver import PushReceiver, follow_pushes
from invoicing_async._sync import store as _store
from invoicing_async._sync.engine import SyncEngine
from invoicing_async._sync.memory import MemoryStore
from invoicing_async._sync.postgres import PostgresStore
from invoicing_async._sync.report import BatchCommitted, SyncProgress, SyncReport
from invoicing_async._sync.sqlite import SQLiteStore
from invoicing_async._sync.store import BatchResult, PendingEntry, Store
from invoicing_async._text import moved_name as _moved_name

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
]

if not TYPE_CHECKING:  # type checkers see only the names above

    def __getattr__(name: str) -> object:
        frames = {"store_dataframes": _store.store_dataframes}
        return _moved_name(__name__, name, frames, "invoicing_async.contrib.pandas")
