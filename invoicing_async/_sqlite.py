"""SQLite plumbing shared by the files of the shared budget and of the sync store."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["retry_locked"]

T = TypeVar("T")


def retry_locked(step: Callable[[], T], timeout: float) -> T:
    """Run `step` again while SQLite says the file is locked, until `timeout` seconds: processes
    setting up one new file at once meet SQLITE_BUSY without SQLite's busy wait."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        try:
            return step()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.25)
