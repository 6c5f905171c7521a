"""Client CPU against a hand-written client (benchmarks/handwritten.py): a full sync of
5,000 invoices into SQLite in both formats (targets: JSON <= 0.85, XML <= 0.55), and the
steady state: the CPU of a no-change sync of that account, and how many such accounts one
core keeps synced hourly. The fake service runs in its own process; CPU is this
process's (all its threads), min and median of 3 runs."""

from __future__ import annotations

import asyncio
import resource
import statistics
import tempfile
from pathlib import Path

from benchmarks import handwritten
from benchmarks.common import Result
from benchmarks.server import FakeServerProcess
from invoicing_async.sync import SQLiteStore, SyncEngine

INVOICES = 5000
RUNS = 3
TARGETS = {"json": 0.85, "xml": 0.55}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _ours(server: FakeServerProcess, fmt: str, db: Path) -> tuple[float, int]:
    async with server.client(format=fmt) as client, SQLiteStore(db) as store:
        await client.current_session()  # connection and TLS outside the measurement
        start = _cpu()
        report = await SyncEngine(client, store, concurrency=4).run()
        return _cpu() - start, report.created + report.updated


async def _theirs(server: FakeServerProcess, fmt: str, db: Path) -> tuple[float, int]:
    start = _cpu()
    written = await handwritten.sync(server.base_url, "api-user", "bench-pw", server.ca, db, fmt)
    return _cpu() - start, written


async def _measure() -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {}
    async with FakeServerProcess(invoices=INVOICES) as server:
        for fmt in ("json", "xml"):
            for run in range(RUNS):
                with tempfile.TemporaryDirectory() as tmp:
                    ours, n = await _ours(server, fmt, Path(tmp) / "ours.db")
                    assert n == INVOICES
                    theirs, m = await _theirs(server, fmt, Path(tmp) / "theirs.db")
                    assert m == INVOICES
                    figures.setdefault(f"ours {fmt}", []).append(ours)
                    figures.setdefault(f"theirs {fmt}", []).append(theirs)
                    if run == 0:  # the steady state: the same account again, nothing changed
                        steady, changed = await _ours(server, fmt, Path(tmp) / "ours.db")
                        assert changed == 0
                        figures.setdefault(f"steady {fmt}", []).append(steady)
                        plain, rewritten = await _theirs(server, fmt, Path(tmp) / "theirs.db")
                        assert rewritten == 0
                        figures.setdefault(f"plain steady {fmt}", []).append(plain)
    return figures


def run() -> list[Result]:
    figures = asyncio.run(_measure())
    results = []
    for fmt in ("json", "xml"):
        ours, theirs = sorted(figures[f"ours {fmt}"]), sorted(figures[f"theirs {fmt}"])
        results.append(
            Result(
                f"client CPU, full sync of {INVOICES:,} invoices ({fmt}), ours / hand-written",
                statistics.median(ours),
                statistics.median(theirs),
                "s",
                TARGETS[fmt],
                note=f"min/median ours {ours[0]:.2f}/{statistics.median(ours):.2f} s, "
                f"hand-written {theirs[0]:.2f}/{statistics.median(theirs):.2f} s",
            )
        )
        steady, plain = min(figures[f"steady {fmt}"]), min(figures[f"plain steady {fmt}"])
        results.append(
            Result(
                f"client CPU, no-change sync of {INVOICES:,} invoices ({fmt}), ours / hand-written",
                steady * 1000,
                plain * 1000,
                "ms",
                0.0,
                informational=True,
                note=f"one core keeps ~{3600 / steady:,.0f} such accounts synced hourly "
                f"(hand-written: ~{3600 / plain:,.0f})",
            )
        )
    return results
