"""The progress bar: a sane rate from the first tick, and the counts it is fed."""

from __future__ import annotations

import io

from invoicing_async._cli.progress import ProgressBar
from invoicing_async.sync import SyncProgress


def progress(done: int) -> SyncProgress:
    return SyncProgress(done=done, total=1000, requests=1 + done // 100, budget_left=349, eta=None)


def test_the_first_tick_shows_no_invented_rate() -> None:
    out = io.StringIO()
    bar = ProgressBar("sync", file=out)
    bar.update(progress(100))
    first = out.getvalue()
    bar.close()
    assert "100/1000" in first
    assert "?inv/s" in first  # unknown yet, rather than 100 invoices in ~0 s
    assert "requests=2" in first
    assert "budget=349" in first


def test_later_ticks_count_from_the_first() -> None:
    out = io.StringIO()
    bar = ProgressBar("sync", file=out)
    for done in (100, 200, 300):
        bar.update(progress(done))
    bar.close()
    text = out.getvalue()
    assert "300/1000" in text
    assert "requests=4" in text
