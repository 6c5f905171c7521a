"""The progress bar: a sane rate from the first tick, the counts it is fed, and the
engine drawing it when asked (`SyncEngine(progress=True)`)."""

from __future__ import annotations

import io
import sys

import pytest

from invoicing_async._sync.engine import ProgressBar
from invoicing_async.sync import MemoryStore, SyncEngine, SyncProgress
from invoicing_async.testing import FakeInvoicingService


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


class Terminal(io.StringIO):
    """Text written to a terminal: tqdm draws its bar only there (or in a notebook)."""

    def isatty(self) -> bool:
        return True


async def test_the_engine_draws_a_bar_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """`SyncEngine(progress=True)`: a bar on stderr with the counts the `sync` command
    shows, beside the engine's own `on_progress`; each run ends its bar."""
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    seen: list[SyncProgress] = []
    async with (
        FakeInvoicingService(invoices=150, seed=4, tls=False) as service,
        service.client() as client,
        MemoryStore() as store,
    ):
        engine = SyncEngine(client, store, progress=True, on_progress=seen.append)
        first = await engine.run()
        drawn = terminal.getvalue()
        service.account.mutate(min(service.account.invoices))
        await engine.run()
    assert first.created == 150
    assert [p.done for p in seen] == [100, 150, 1]
    assert "sync: " in drawn
    assert "150/150" in drawn
    assert "requests=3" in drawn
    assert f"budget={seen[1].budget_left}" in drawn
    assert "1/1" in terminal.getvalue()[len(drawn) :]  # the second run's own bar


async def test_no_bar_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    async with (
        FakeInvoicingService(invoices=3, tls=False) as service,
        service.client() as client,
        MemoryStore() as store,
    ):
        assert (await SyncEngine(client, store).run()).created == 3
    assert terminal.getvalue() == ""
