"""A tqdm progress bar fed by the sync engine's progress callback."""

from __future__ import annotations

from tqdm import tqdm

from invoicing_async._sync.engine import SyncProgress

__all__ = ["ProgressBar"]


class ProgressBar:
    """Shows invoices fetched, requests spent and the budget left; draws on stderr."""

    def __init__(self, label: str) -> None:
        self._bar: tqdm[None] | None = None
        self._label = label

    def update(self, progress: SyncProgress) -> None:
        if self._bar is None:
            self._bar = tqdm(total=progress.total, desc=self._label, unit="inv", leave=True)
        self._bar.n = progress.done
        self._bar.set_postfix(
            requests=progress.requests, budget=progress.budget_left, refresh=False
        )
        self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
