"""Many accounts on one PostgreSQL (issues #14, #26): 2,000 accounts x 300 invoices, or
the fleet run, 10,000 accounts x 100 invoices; 3 workers.

The fake service runs in its own process with each account on a port of its own (as each
customer has a host of its own: the shared budget is keyed by host[:port]), 350 requests an
hour each. Accounts are added with `accounts import` of a CSV file (secrets as env:
references; its time is reported), 3 `invoicing-async worker` processes start, `enqueue
--all` queues every account; once a third are complete one worker is killed with SIGKILL
and restarted. Measured until every account has a complete run: accounts per minute,
requests per account against the minimum (1 list + a fetch per 100), runs of one account
that overlap (0), 403s (0), the most PostgreSQL connections at once, each batch commit's
latency (apply_documents, timed inside the workers), and (not in the fleet run) the peak
RSS of reading 1,000,000 revisions in a fresh process.

python -m benchmarks.bench_jobs [--quick | --fleet] [--accounts N] [--invoices M] [--repeat R]
(--fleet adds a pass over every account with nothing changed: statements per run from
pg_stat_statements, CPU per run of the workers and of PostgreSQL, accounts per minute)
($BENCH_JOBS_CONCURRENCY: accounts each worker runs at once, 8 by default)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import psycopg

from benchmarks.common import Result
from benchmarks.pg_cpu import PostgresCpu
from tests.servers import start_postgres

ROOT = Path(__file__).parents[1]
WORKERS, REVISIONS = 3, 1_000_000
CONCURRENCY = int(os.environ.get("BENCH_JOBS_CONCURRENCY", "8"))  # accounts a worker runs at once
HEARTBEAT, STALLED_AFTER = 2.0, 10.0
MAX_CONNECTIONS = 400  # each worker: 2 pools of 2 x 8 + 4, and a budget pool (<= 4) a run
SECRET_ENV, PASSWORD = "INVOICING_SECRET_BENCH", "bench-pw"
FLEET = (10_000, 100)  # accounts, invoices each: the fleet run (issue #26)


def minimum(invoices: int) -> int:
    """Requests of one account's first sync: the sync list, then fetches of 100."""
    return 1 + math.ceil(invoices / 100)


@attrs.frozen
class Measured:
    """One repeat's figures."""

    accounts: int
    invoices: int
    seconds: float
    imported: float  # seconds of `accounts import`
    complete: int
    requests: int  # at the fake service, every run (lost ones too)
    uninterrupted: float  # mean requests of a complete run, of accounts with no other run
    refused: int
    overlaps: int
    lost: int
    locked: int
    batches: list[float]
    connections: int
    cpu: CpuShares
    first: Pass  # the first syncs, the kill included
    unchanged: Pass | None  # every account again, nothing changed at the service


@attrs.frozen
class Pass:
    """One pass over every account: runs, statements (`pg_stat_statements`, top level, this
    database) and CPU seconds of the workers and of PostgreSQL."""

    runs: int
    seconds: float
    statements: int
    worker_cpu: float
    postgres_cpu: float

    def per_run(self) -> str:
        return (
            f"{self.statements / self.runs:.1f} statements, "
            f"{self.worker_cpu * 1000 / self.runs:.1f} ms worker CPU, "
            f"{self.postgres_cpu * 1000 / self.runs:.1f} ms PostgreSQL CPU per account run "
            f"({self.runs} runs)"
        )


async def _python(*args: str, log: Path | None = None) -> asyncio.subprocess.Process:
    out = log.open("ab") if log is not None else None
    try:
        return await asyncio.create_subprocess_exec(
            sys.executable, *args, cwd=ROOT, env={**os.environ, SECRET_ENV: PASSWORD},
            stdout=out or asyncio.subprocess.DEVNULL, stderr=out or asyncio.subprocess.DEVNULL,
        )  # fmt: skip
    finally:
        if out is not None:
            out.close()


async def _cli(url: str, *args: str) -> None:
    process = await _python("-m", "invoicing_async", *args, "--database-url", url)
    if await process.wait() != 0:
        raise RuntimeError(f"invoicing-async {' '.join(args)} exited {process.returncode}")


class FakeService:
    """benchmarks.jobs_server as a child: its accounts' URLs and request counters."""

    def __init__(self, accounts: int, invoices: int, tmp: Path) -> None:
        self.accounts = accounts
        self.invoices = invoices
        self.urls_path = tmp / "urls.json"
        self.urls: dict[str, str] = {}
        self.generated = ""
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.jobs_server", str(self.accounts), str(self.invoices),
            PASSWORD, str(self.urls_path), cwd=ROOT,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            limit=64 * 2**20,  # a counters line names every account (10,000: ~300 kB)
        )  # fmt: skip
        while (line := await self._line()) != "ready":
            self.generated = line
        self.urls = json.loads(self.urls_path.read_text())

    async def _line(self) -> str:
        assert self.process is not None
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), 1800)
        if not line:
            raise RuntimeError("the fake service exited")
        return line.decode().strip()

    async def counters(self) -> dict[str, list[int]]:
        assert self.process is not None
        assert self.process.stdin is not None
        self.process.stdin.write(b"stats\n")
        await self.process.stdin.drain()
        counts: dict[str, list[int]] = json.loads(await self._line())
        return counts

    async def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            await self.process.wait()


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int, *, reaped: bool = False) -> float:
    """CPU seconds of a live process (with `reaped`, of its waited-for children too)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime + (cutime + cstime if reaped else 0)) / _TICK


def _postgres_cpu(postmaster: int) -> float:
    """CPU seconds of PostgreSQL's whole process tree: the postmaster, its ended backends
    and its live ones (as `benchmarks.bench_fleet` counts it from outside)."""
    return PostgresCpu(postmaster).total()


@attrs.frozen
class CpuShares:
    """CPU seconds spent by each part over the timed window (where the 2 cores went)."""

    workers: float  # the live workers at the end (the killed one's seconds are lost)
    fake: float
    postgres: float
    wall: float

    def note(self) -> str:
        cores = os.cpu_count() or 1
        parts = {"workers": self.workers, "fake service": self.fake, "PostgreSQL": self.postgres}
        shares = ", ".join(f"{k} {v:.0f} s" for k, v in parts.items())
        busy = sum(parts.values()) / (self.wall * cores)
        total = f"{self.wall * cores:.0f} ({cores} cores x {self.wall:.0f} s; {busy:.0%} ours)"
        return f"CPU seconds: {shares} of {total}"


_POLLING: dict[str, psycopg.Connection[Any]] = {}


def _count(url: str, sql: str) -> int:
    """One number, on one connection a database kept open: a connection a poll (two a
    second) would cost PostgreSQL a backend's start each, counted in its CPU (issue #48)."""
    conn = _POLLING.get(url)
    if conn is None or conn.closed:
        conn = _POLLING[url] = psycopg.connect(url, autocommit=True)
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


OVERLAPS = """
SELECT count(*) FROM invoicing_runs a JOIN invoicing_runs b
  ON a.account = b.account AND a.id < b.id
WHERE a.status <> 'locked' AND b.status <> 'locked'
  AND b.started_at < coalesce(a.finished_at, now())
  AND a.started_at < coalesce(b.finished_at, now())
"""
# The benchmark's own queries are marked, so that statement counts leave them out.
MARK = "/* bench */ "
CONNECTIONS = MARK + "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
COMPLETE = MARK + "SELECT count(DISTINCT account) FROM invoicing_runs WHERE status = 'complete'"
STATEMENTS = (
    MARK + "SELECT sum(calls) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
    " WHERE d.datname = current_database() AND s.query NOT LIKE '/* bench */%'"
)
RESET = MARK + "SELECT count(*) FROM (SELECT pg_stat_statements_reset()) r"


async def _add_accounts(url: str, urls: dict[str, str], tmp: Path) -> float:
    """`accounts import` of a CSV of every account; its seconds (the command's process)."""
    csv = tmp / "accounts.csv"
    csv.write_text(
        "name,base_url,username,password_env,format\n"
        + "".join(f"{name},{base},{name},{SECRET_ENV},json\n" for name, base in urls.items())
    )
    started = time.perf_counter()
    await _cli(url, "accounts", "import", str(csv))
    seconds = time.perf_counter() - started
    with psycopg.connect(url, autocommit=True) as conn:
        # Not due yet: `enqueue --all` queues them once the workers are up.
        conn.execute("UPDATE invoicing_accounts SET due_at = now() + interval '1 day'")
    return seconds


async def _worker(url: str, batch_log: Path, log: Path) -> asyncio.subprocess.Process:
    return await _python(
        "-m", "benchmarks.jobs_worker", "worker", str(batch_log), "worker",
        "--database-url", url, "--concurrency", str(CONCURRENCY),
        "--heartbeat", str(HEARTBEAT), "--stalled-after", str(STALLED_AFTER), log=log,
    )  # fmt: skip


async def _wait_complete(
    url: str,
    accounts: int,
    kill_at: int | None,
    workers: list[Any],
    tmp: Path,
    complete: str = COMPLETE,
) -> int:
    """Poll until every account has a complete run (`complete` counts them); SIGKILL
    worker 0 at `kill_at`, restart it. Returns the most connections seen at once."""
    killed, connections = kill_at is None, 0
    last, last_change = -1, time.monotonic()
    while (done := _count(url, complete)) < accounts:
        connections = max(connections, _count(url, CONNECTIONS))
        if done != last:
            last, last_change = done, time.monotonic()
        elif time.monotonic() - last_change > 300:
            raise RuntimeError(f"no progress for 300 s at {done}/{accounts}; logs in {tmp}")
        if not killed and kill_at is not None and done >= kill_at:
            workers[0].send_signal(signal.SIGKILL)
            await workers[0].wait()
            killed = True
            print(f"  killed a worker at {done}/{accounts} complete", file=sys.stderr)
            await asyncio.sleep(STALLED_AFTER + 1)  # its heartbeat is stale: its jobs are lost
            workers[0] = await _worker(url, tmp / "batches-0b.log", tmp / "worker-0b.log")
        await asyncio.sleep(0.5)
    return connections


async def _repeat(
    pg_url: str, postmaster: int, fake: FakeService, index: int, tmp: Path, no_change: bool
) -> Measured:
    name = f"bench_jobs_{index}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = pg_url.rsplit("/", 1)[0] + f"/{name}"
    run_dir = tmp / name
    run_dir.mkdir()
    await _cli(url, "db", "migrate")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    imported = await _add_accounts(url, fake.urls, run_dir)
    before = await fake.counters()
    workers = [
        await _worker(url, run_dir / f"batches-{i}.log", run_dir / f"worker-{i}.log")
        for i in range(WORKERS)
    ]
    await asyncio.sleep(3)  # the workers are up and idle
    assert fake.process is not None
    fake_cpu, pg_cpu = _cpu(fake.process.pid), _postgres_cpu(postmaster)
    _count(url, RESET)
    start = time.perf_counter()
    unchanged = None
    try:
        await _cli(url, "enqueue", "--all")
        connections = await _wait_complete(url, fake.accounts, fake.accounts // 3, workers, run_dir)
        seconds = time.perf_counter() - start
        statements = _count(url, STATEMENTS)
        cpu = CpuShares(
            workers=sum(_cpu(w.pid) for w in workers),
            fake=_cpu(fake.process.pid) - fake_cpu,
            postgres=_postgres_cpu(postmaster) - pg_cpu,
            wall=seconds,
        )
        first = Pass(
            runs=_count(url, MARK + "SELECT count(*) FROM invoicing_runs"),
            seconds=seconds,
            statements=statements,
            worker_cpu=cpu.workers,
            postgres_cpu=cpu.postgres,
        )
        # The first syncs' requests and runs, before a no-change pass adds its own.
        served = await fake.counters()
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT avg(requests) FROM invoicing_runs r WHERE status = 'complete' AND NOT"
                " EXISTS (SELECT 1 FROM invoicing_runs o WHERE o.account = r.account"
                " AND o.id <> r.id)"
            ).fetchone()
        if no_change:
            unchanged = await _no_change_pass(url, postmaster, fake.accounts, workers, run_dir)
    finally:
        for worker in workers:
            if worker.returncode is None:
                worker.send_signal(signal.SIGTERM)
        await asyncio.gather(*(w.wait() for w in workers))
    after = await fake.counters()
    return Measured(
        accounts=fake.accounts,
        invoices=fake.invoices,
        seconds=seconds,
        imported=imported,
        complete=_count(url, COMPLETE),
        requests=sum(served[n][0] - before[n][0] for n in served),
        uninterrupted=float(row[0]) if row and row[0] is not None else 0.0,
        refused=sum(after[n][1] - before[n][1] for n in after),
        overlaps=_count(url, OVERLAPS),
        lost=_count(url, "SELECT count(*) FROM invoicing_runs WHERE status = 'lost'"),
        locked=_count(url, "SELECT count(*) FROM invoicing_runs WHERE status = 'locked'"),
        batches=[float(x) for p in run_dir.glob("batches-*.log") for x in p.read_text().split()],
        connections=connections,
        cpu=cpu,
        first=first,
        unchanged=unchanged,
    )


async def _no_change_pass(
    url: str, postmaster: int, accounts: int, workers: list[Any], tmp: Path
) -> Pass:
    """Every account queued again with nothing changed at the service: until each has a
    second complete run, the statements, the runs and the CPU of workers and PostgreSQL."""
    last = _count(url, MARK + "SELECT max(id) FROM invoicing_runs")
    complete = (
        MARK + "SELECT count(DISTINCT account) FROM invoicing_runs"
        f" WHERE status = 'complete' AND id > {last}"
    )
    await asyncio.sleep(3)  # the first pass's last writes are done
    worker_cpu, pg_cpu = sum(_cpu(w.pid) for w in workers), _postgres_cpu(postmaster)
    _count(url, RESET)
    start = time.perf_counter()
    await _cli(url, "enqueue", "--all")
    await _wait_complete(url, accounts, None, workers, tmp, complete)
    seconds = time.perf_counter() - start
    return Pass(
        runs=_count(url, MARK + f"SELECT count(*) FROM invoicing_runs WHERE id > {last}"),
        seconds=seconds,
        statements=_count(url, STATEMENTS),
        worker_cpu=sum(_cpu(w.pid) for w in workers) - worker_cpu,
        postgres_cpu=_postgres_cpu(postmaster) - pg_cpu,
    )


async def _idle_batches(url: str) -> list[float]:
    """apply_documents of 100 new invoices (ms) with nothing else running, in a fresh process."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.jobs_worker", "batches", url, "bench-1",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await child.communicate()
    return [float(x) for x in out.split()]


async def _revisions_peak(url: str, repeat: int) -> tuple[float, float]:
    """Peak RSS (MiB) of a fresh process reading 1,000,000 revisions, and before reading."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO invoicing_invoices (account, id, revision, document, raw, synced_at)"
            " SELECT 'million', g, 1000 + g %% 7, '{}'::jsonb, '\\x7b7d'::bytea, now()"
            " FROM generate_series(1, %s) g",
            (REVISIONS,),
        )
    peaks: list[tuple[float, float]] = []
    for _ in range(repeat):
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.jobs_worker", "revisions", url, "million",
            cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await child.communicate()
        before, peak, count = out.decode().split()
        assert int(count) == REVISIONS, count
        peaks.append((float(peak), float(before)))
    return min(peaks)


@attrs.frozen
class Measurement:
    """Every repeat, and what is measured once."""

    runs: list[Measured]
    generated: str
    idle_batches: list[float]
    peak: tuple[float, float] | None


async def measure(
    accounts: int, invoices: int, repeat: int, memory: bool = True, no_change: bool = False
) -> Measurement:
    """`memory`: also the idle batch commits and the peak RSS of reading 1,000,000
    revisions (minutes of inserting; left out of the fleet run). `no_change`: a second
    pass over every account, nothing changed (the fleet run)."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-jobs-") as name,
        start_postgres(
            MAX_CONNECTIONS,
            "shared_preload_libraries=pg_stat_statements",
            "pg_stat_statements.track=top",
        ) as pg,
    ):
        tmp = Path(name)
        fake = FakeService(accounts, invoices, tmp)
        await fake.start()
        print(f"  fake service: {fake.generated}", file=sys.stderr)
        try:
            runs = []
            for i in range(repeat):
                runs.append(await _repeat(pg.url(), pg.process.pid, fake, i, tmp, no_change))
                last = runs[-1]
                print(
                    f"  run {i + 1}: {last.seconds:.1f}s; accounts import {last.imported:.1f}s; "
                    f"{last.connections} PostgreSQL connections at most; {last.cpu.note()}; "
                    f"first syncs: {last.first.per_run()}",
                    file=sys.stderr,
                )
                if last.unchanged is not None:
                    print(f"  no change: {last.unchanged.per_run()}", file=sys.stderr)
        finally:
            await fake.stop()
        if not memory:
            return Measurement(runs, fake.generated, [], None)
        url = pg.url().rsplit("/", 1)[0] + "/bench_jobs_0"
        idle = await _idle_batches(url)
        return Measurement(runs, fake.generated, idle, await _revisions_peak(url, 3))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


def results(m: Measurement) -> list[Result]:
    runs, generated, peak = m.runs, m.generated, m.peak
    n, invoices = runs[0].accounts, runs[0].invoices
    least = minimum(invoices)
    rates = [r.accounts * 60 / r.seconds for r in runs]
    best = max(runs, key=lambda r: r.accounts / r.seconds)
    batches = [x for r in runs for x in r.batches]
    p50, p99 = _pct(batches, 0.5), _pct(batches, 0.99)
    idle50, idle99 = _pct(m.idle_batches, 0.5), _pct(m.idle_batches, 0.99)
    setup = f"{n} accounts x {invoices}, {WORKERS} workers x {CONCURRENCY}, one SIGKILLed"
    fleet = (n, invoices) == FLEET
    part = "fleet" if fleet else "jobs"  # the two setups' figures side by side in latest.json
    spread = f"best {max(rates):.0f}, median {statistics.median(rates):.0f} of {len(runs)}"

    def worst(field: str) -> float:
        return max(float(getattr(r, field)) for r in runs)

    found = [
        Result(
            f"{part}: accounts per minute ({setup})", max(rates), 1000.0 if fleet else n / 60,
            "accounts/min", 1.0, higher_is_better=True, informational=not fleet,
            note=f"{spread}; bound: "
            f"{'1,000 a minute' if fleet else 'every account within the hour'}; "
            f"{best.seconds:.0f}s for "
            f"all, with the {STALLED_AFTER + 1:.0f}s pause after the kill; at most "
            f"{worst('connections'):.0f} PostgreSQL connections at once; fake data: {generated}",
        ),
        Result(
            f"{part}: accounts without a complete run", n - min(r.complete for r in runs), n,
            "accounts", 0.0, note=f"lost runs (the killed worker's): {worst('lost'):.0f}",
        ),
        Result(
            f"{part}: requests per account at the service / minimum", best.requests / n, least,
            "requests", 1.01,
            note=f"every run counted (an account whose run was lost syncs again, what its "
            f"lost run stored is kept); minimum 1 list + {least - 1} fetches of 100; "
            "bound: the minimum +1%",
        ),
        Result(
            f"{part}: requests of an uninterrupted run / minimum", worst("uninterrupted"), least,
            "requests", 1.0, note="mean over the accounts that had one run only",
        ),
        Result(
            f"{part}: accounts import of {n} accounts (CSV)", max(r.imported for r in runs), 10.0,
            "s", 1.0, note="the whole command, Python starting included; bound: 10 s",
        ),
        Result(
            f"{part}: most PostgreSQL connections at once", worst("connections"), MAX_CONNECTIONS,
            "connections", 1.0, informational=True,
            note="client backends in pg_stat_activity, polled every 0.5 s; "
            + best.cpu.note(),
        ),
        Result(
            f"{part}: overlapping runs of one account", worst("overlaps"), 1, "pairs", 0.0,
            note=f"runs that found the account locked: {worst('locked'):.0f}",
        ),
        Result(
            f"{part}: 403s from the service (budget overruns)", worst("refused"), 1, "responses",
            0.0,
        ),
        Result(
            f"{part}: PostgresStore batch commit p99", p99, p50, "ms", 1.0, informational=True,
            note=f"p50 {p50:.1f} ms, p99 {p99:.1f} ms over {len(batches)} batches of 100, "
            f"timed in the workers under the full load (2 shared cores)",
        ),
    ]  # fmt: skip
    found += _pass_results(part, runs, fleet)
    if peak is None:
        return found
    return [
        *found,
        Result(
            f"{part}: PostgresStore batch commit p99, nothing else running", idle99, idle50, "ms",
            1.0, informational=True,
            note=f"p50 {idle50:.1f} ms, p99 {idle99:.1f} ms over {len(m.idle_batches)} batches "
            "of 100 new invoices, one process",
        ),
        Result(
            f"{part}: peak RSS reading {REVISIONS:,} revisions", peak[0], peak[1], "MiB", 1.0,
            informational=True,
            note=f"a fresh process: {peak[1]:.0f} MiB before reading, {peak[0]:.0f} MiB peak "
            f"(+{peak[0] - peak[1]:.0f}); min of 3",
        ),
    ]  # fmt: skip


def _pass_results(part: str, runs: list[Measured], fleet: bool) -> list[Result]:
    """Statements and CPU per account run of the first syncs and, when it ran, of the
    no-change pass, with its accounts per minute (issue #35's targets; the CPU and the
    rate judged at the fleet's size only, the statements always)."""

    def per_run(p: Pass, field: str) -> float:
        return float(getattr(p, field)) / p.runs

    first = min(runs, key=lambda r: per_run(r.first, "statements")).first
    found = [
        Result(
            f"{part}: statements per first-sync run", per_run(first, "statements"), 14.0,
            "statements", 1.0,
            note=f"pg_stat_statements, top level, this database; {first.per_run()}; the "
            "killed worker's lost runs and their repeats included; bound: 14",
        ),
        Result(
            f"{part}: worker CPU per first-sync run", per_run(first, "worker_cpu") * 1000, 20.0,
            "ms", 1.0, informational=not fleet,
            note="the live workers' CPU over the pass (the killed one's is lost) / runs; "
            "bound: 20 ms",
        ),
    ]  # fmt: skip
    passes = [r.unchanged for r in runs if r.unchanged is not None]
    if not passes:
        return found
    best = min(passes, key=lambda p: p.seconds / p.runs)
    rate = best.runs * 60 / best.seconds
    return [
        *found,
        Result(
            f"{part}: no-change accounts per minute", rate, 4000.0, "accounts/min", 1.0,
            higher_is_better=True, informational=not fleet,
            note=f"every account queued again, nothing changed; {best.per_run()}; bound: 4,000",
        ),
        Result(
            f"{part}: statements per no-change run", per_run(best, "statements"), 10.0,
            "statements", 1.0,
            note="pg_stat_statements, top level (worker, store, budget, job queue); bound: 10",
        ),
        Result(
            f"{part}: worker CPU per no-change run", per_run(best, "worker_cpu") * 1000, 6.0,
            "ms", 1.0, informational=not fleet,
            note="the workers' CPU over the pass / runs; bound: 6 ms",
        ),
        Result(
            f"{part}: PostgreSQL CPU per no-change run", per_run(best, "postgres_cpu") * 1000, 4.0,
            "ms", 1.0, informational=not fleet,
            note="the postmaster and its backends over the pass / runs; bound: 4 ms",
        ),
    ]  # fmt: skip


def run(
    accounts: int = 2000,
    invoices: int = 300,
    repeat: int = 1,
    memory: bool = True,
    no_change: bool = False,
) -> list[Result]:
    return results(asyncio.run(measure(accounts, invoices, repeat, memory, no_change)))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_jobs")
    parser.add_argument("--quick", action="store_true", help="100 accounts: a smoke run")
    parser.add_argument(
        "--fleet",
        action="store_true",
        help="10,000 accounts x 100 invoices (issue #26) unless --accounts/--invoices say "
        "otherwise, then every account again with nothing changed (issue #35)",
    )
    parser.add_argument("--accounts", type=int)
    parser.add_argument("--invoices", type=int)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    from benchmarks.run import record, table

    started = time.perf_counter()
    accounts, invoices = FLEET if args.fleet else (2000, 300)
    accounts = args.accounts or accounts
    invoices = args.invoices or invoices
    if args.quick:
        accounts = 100
    found = run(accounts, invoices, args.repeat, memory=not args.fleet, no_change=args.fleet)
    if (accounts, invoices) in ((2000, 300), FLEET):  # the issues' figures: into latest.json
        record(found, time.perf_counter() - started)
    print(table(found))
    return 0 if all(r.met for r in found) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
