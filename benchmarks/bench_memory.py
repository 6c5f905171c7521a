"""Peak memory (RSS) of the client process: a full sync of 100,000 invoices into SQLite,
and diffing a 1,000,000-entry sync list against a store. Each runs in a fresh process."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from benchmarks.common import Result
from benchmarks.server import FakeServerProcess

SYNC_INVOICES = 100_000
DIFF_ENTRIES = 1_000_000
MIB = 1024 * 1024


async def _child(*args: str) -> float:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.memory_child",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(err.decode()[-2000:])
    return float(out.decode().split()[-1])


async def _sync_peak() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeServerProcess(invoices=SYNC_INVOICES) as server:
            return await _child("sync", server.base_url, str(server.ca), str(Path(tmp) / "s.db"))


async def _diff_peak() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        return await _child("diff", str(DIFF_ENTRIES), str(Path(tmp) / "d.db"))


def run() -> list[Result]:
    sync_mib = asyncio.run(_sync_peak())
    diff_mib = asyncio.run(_diff_peak())
    return [
        Result(
            name=f"peak RSS, full sync of {SYNC_INVOICES:,} invoices into SQLite",
            ours=sync_mib * MIB / 1e6,
            baseline=150,
            unit="MB",
            target=1.0,
            note="client process only (the fake service runs in another)",
        ),
        Result(
            name=f"peak RSS, diffing a {DIFF_ENTRIES:,}-entry sync list against a store",
            ours=diff_mib * MIB / 1e6,
            baseline=300,
            unit="MB",
            target=1.0,
            note="JSON list decoded streaming into SyncRevisions; store read row by row",
        ),
    ]
