"""The dlt source into DuckDB beside our own `SyncEngine` into `SQLiteStore`, same run:
a 10,000-invoice first load and a load with nothing changed. Requests against the
minimum (1 + ceil(10,000 / 100) = 101, then 1); wall time and client CPU against the
engine's (reported: dlt's normalize and load steps are work the engine does not do).

The fake service runs in its own process (plain http on loopback), so its CPU is not
counted; the `invoices` resource alone is loaded (templates and session are one
request each, outside the sync plan). dlt and the source are imported before timing, as
in any process that runs a pipeline. Each side first runs one untimed full load into a
throwaway store (the engine) or destination (dlt), so both are measured equally warm,
whatever ran before in the process. Targets: a first load within 3x the engine's wall
time and CPU, a no-change load within 0.5 s of CPU.
"""

from __future__ import annotations

import asyncio
import math
import os
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from benchmarks.common import Result
from benchmarks.server import FakeServerProcess
from invoicing_async import RateBudget
from invoicing_async.sync import SQLiteStore, SyncEngine

INVOICES = 10_000
T = TypeVar("T")


def _cpu() -> float:
    """Client CPU seconds: every thread of this process (dlt's included) and children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def _measured(work: Callable[[], T]) -> tuple[T, float, float]:
    """(result, wall seconds, client CPU seconds) of `work` run in a thread."""
    cpu, start = _cpu(), time.perf_counter()
    result = await asyncio.to_thread(work)
    return result, time.perf_counter() - start, _cpu() - cpu


async def _engine(server: FakeServerProcess, path: Path) -> list[tuple[int, float, float]]:
    """(requests, wall, CPU) of the engine's first run and of a run with nothing changed,
    after an untimed warm-up run into a throwaway store."""
    runs = []
    async with server.client(format="json") as client, SQLiteStore(path) as store:
        async with SQLiteStore(path.with_name("warm-up.db")) as throwaway:
            await SyncEngine(client, throwaway).run()
        for _ in range(2):
            cpu, start = _cpu(), time.perf_counter()
            report = await SyncEngine(client, store).run()
            runs.append((report.requests, time.perf_counter() - start, _cpu() - cpu))
    return runs


def _dlt_load(server: FakeServerProcess, workdir: Path, budget: RateBudget) -> int:
    """One load of the `invoices` resource; the requests it took from the budget."""
    import dlt

    from invoicing_async.contrib.dlt import invoicing_source

    pipeline = dlt.pipeline(
        pipeline_name="bench_dlt",
        pipelines_dir=str(workdir / "pipelines"),
        destination=dlt.destinations.duckdb(str(workdir / "invoices.duckdb")),
        dataset_name="invoicing",
    )
    before = budget.snapshot().used_in_period
    source = invoicing_source(
        base_url=server.base_url, username="api-user", password="bench-pw", budget=budget
    )
    pipeline.run(source.with_resources("invoices"))
    return budget.snapshot().used_in_period - before


async def _all(workdir: Path) -> tuple[list[tuple[int, float, float]], ...]:
    import dlt  # noqa: F401 - imported before timing

    import invoicing_async.contrib.dlt  # noqa: F401

    async with FakeServerProcess(invoices=INVOICES, tls=False) as server:
        engine = await _engine(server, workdir / "mirror.db")
        budget = RateBudget(limit=10**9)
        await asyncio.to_thread(_dlt_load, server, workdir / "warm-up", budget)
        dlt_runs = []
        for _ in range(2):
            dlt_runs.append(await _measured(lambda: _dlt_load(server, workdir, budget)))
    return engine, dlt_runs


def run() -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        os.environ["DLT_DATA_DIR"] = str(workdir / "dlt")
        os.environ["RUNTIME__DLTHUB_TELEMETRY"] = "false"
        engine, dlt_runs = asyncio.run(_all(workdir))
    minimum = (1 + math.ceil(INVOICES / 100), 1)
    results = []
    for label, least, (engine_requests, engine_wall, engine_cpu), (requests, wall, cpu) in zip(
        ("first load", "no-change load"), minimum, engine, dlt_runs, strict=True
    ):
        first = label == "first load"
        results += [
            Result(
                name=f"dlt source requests, {label}, {INVOICES} invoices",
                ours=requests,
                baseline=least,
                unit="requests",
                target=1.0,
                note=f"minimum 1 + ceil(changed/100); SyncEngine: {engine_requests}",
            ),
            Result(
                name=f"dlt source wall time, {label}, {INVOICES} invoices",
                ours=wall,
                baseline=engine_wall,
                unit="s",
                target=3.0,
                informational=not first,
                note="baseline: SyncEngine into SQLiteStore, same server and run; dlt adds "
                "its extract, normalize and DuckDB load steps",
            ),
            Result(
                name=f"dlt source client CPU, {label}, {INVOICES} invoices",
                ours=cpu,
                baseline=engine_cpu if first else 0.5,
                unit="s",
                target=3.0 if first else 1.0,
                note="baseline: SyncEngine into SQLiteStore (CPU of this process's threads)"
                if first
                else f"bound: 0.5 s of CPU; SyncEngine: {engine_cpu:.3f} s",
            ),
        ]
    return results


if __name__ == "__main__":
    from benchmarks.run import table

    print(table(run()))
