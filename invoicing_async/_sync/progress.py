"""The sync's progress bar: `tqdm.auto` (a widget in notebooks, text on a terminal's
stderr, nothing when redirected), fed by the engine's progress callback."""

from __future__ import annotations

from typing import IO

from tqdm.auto import tqdm

from invoicing_async._sync.report import SyncProgress

__all__ = ["ProgressBar"]


class ProgressBar:
    """Shows invoices fetched, requests spent and the budget left; draws on stderr when
    it is a terminal (a widget in a notebook), or on the `file` given."""

    def __init__(self, label: str, *, file: IO[str] | None = None) -> None:
        self._bar: tqdm[None] | None = None
        self._label = label
        self._file = file

    def update(self, progress: SyncProgress) -> None:
        """Draw the counts after a committed batch (the bar appears at the first)."""
        bar = self._bar
        if bar is None:
            # The bar starts at the first committed batch: counting that batch as done
            # in no time would show a rate of millions of invoices a second.
            bar = self._bar = tqdm(
                total=progress.total,
                initial=progress.done,
                desc=self._label,
                unit="inv",
                leave=True,
                file=self._file,
                disable=None if self._file is None else False,
            )
        else:
            bar.update(progress.done - bar.n)
        bar.set_postfix(requests=progress.requests, budget=progress.budget_left, refresh=False)
        bar.refresh()

    def close(self) -> None:
        """End the bar (the next update starts a new one)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
