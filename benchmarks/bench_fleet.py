"""The fleet measured from outside, as an operator would (issue #48): the public command line
only (`db migrate`, `accounts import` of one CSV, 3 `worker --concurrency 8 --metrics-port`
processes with their default heartbeat, `enqueue --all`), the fake service in its own
process, PostgreSQL's CPU over its whole process tree (the postmaster, its live children and
the ones that exited during the phase, `benchmarks.pg_cpu`), each child by kind.

Phases: the workers idle (CPU per second), the first syncs of every account, then
`--passes` passes over every account with nothing changed. Per phase: runs a minute, worker
and PostgreSQL CPU per run (PostgreSQL by process kind), connections opened per run
(pg_stat_database.sessions), statements by text per run (pg_stat_statements, top level).
The measurement's own two connections (a count every 0.5 s, pg_stat_activity for new
backends) are shown apart and left out of the per-run figures.

python -m benchmarks.bench_fleet [--accounts 300] [--invoices 100] [--passes 3] [--idle 30]
    [--pause 3] [--json OUT]
(--accounts 10000: the fleet run's size, measured the same way)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import attrs
import psycopg

from benchmarks.bench_jobs import SECRET_ENV, FakeService, _add_accounts, _cli, _python
from benchmarks.pg_cpu import Sampler, Snapshot, process_cpu
from tests.servers import free_port, start_postgres

WORKERS, CONCURRENCY = 3, 8
BENCH_APP = "bench-measure"  # the measurement's own connections


@attrs.frozen
class Phase:
    """One phase's figures (CPU in seconds, over the whole phase)."""

    name: str
    runs: int
    seconds: float
    worker_cpu: float
    fake_cpu: float
    postgres: Snapshot
    measuring: float  # PostgreSQL CPU of the measurement's own backends (in `postgres`)
    sessions: int  # connections opened to the database (ours left out)
    statements: list[tuple[int, str]]  # (calls, text), most called first
    wal_bytes: int

    @property
    def postgres_cpu(self) -> float:
        """PostgreSQL's CPU without the measurement's own backends."""
        return self.postgres.total - self.measuring

    def as_dict(self) -> dict[str, Any]:
        per = max(self.runs, 1)
        return {
            "phase": self.name,
            "runs": self.runs,
            "seconds": round(self.seconds, 2),
            "runs_per_minute": round(self.runs * 60 / self.seconds, 1) if self.runs else 0,
            "worker_cpu_ms_per_run": round(self.worker_cpu * 1000 / per, 2),
            "postgres_cpu_ms_per_run": round(self.postgres_cpu * 1000 / per, 2),
            "postgres_cpu_with_measuring_ms_per_run": round(self.postgres.total * 1000 / per, 2),
            "worker_cpu_per_second": round(self.worker_cpu / self.seconds, 4),
            "postgres_cpu_per_second": round(self.postgres_cpu / self.seconds, 4),
            "fake_cpu_ms_per_run": round(self.fake_cpu * 1000 / per, 2),
            "postgres_by_kind_ms_per_run": {
                k: round(v * 1000 / per, 2)
                for k, v in sorted(self.postgres.by_kind.items(), key=lambda kv: -kv[1])
                if abs(v) >= 0.0005
            },
            "sessions": self.sessions,
            "sessions_per_run": round(self.sessions / per, 3),
            "statements_per_run": round(sum(c for c, _ in self.statements) / per, 2),
            "statements": [(round(c / per, 3), text) for c, text in self.statements[:25]],
            "wal_kb_per_run": round(self.wal_bytes / 1024 / per, 1),
        }


class Database:
    """The measurement's connection (one a thread), marked by its application_name."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._local = threading.local()

    def conn(self) -> psycopg.Connection[Any]:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = psycopg.connect(self.url, autocommit=True, application_name=BENCH_APP)
            self._local.conn = conn
        return conn

    def one(self, sql: str, params: Any = None) -> Any:
        row = self.conn().execute(sql, params).fetchone()
        return row[0] if row else None

    def describe(self, pids: list[int]) -> dict[int, str]:
        rows = self.conn().execute(
            "SELECT pid, application_name, backend_type, left(query, 40) FROM pg_stat_activity"
            " WHERE pid = ANY(%s)",
            (pids,),
        )
        kinds = {}
        for pid, app, backend_type, query in rows:
            if app == BENCH_APP:
                kinds[pid] = "measuring (bench)"
            elif backend_type != "client backend":
                kinds[pid] = backend_type
            elif not app:
                kinds[pid] = "client backend (no name yet)"
            else:
                kinds[pid] = f"client: {app}"
            del query
        return kinds


def _statements(db: Database) -> list[tuple[int, str]]:
    rows = (
        db.conn()
        .execute(
            "SELECT s.calls, s.total_exec_time + s.total_plan_time, s.total_plan_time,"
            " regexp_replace(s.query, '\\s+', ' ', 'g') FROM pg_stat_statements s"
            " JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()"
            " AND s.userid = s.userid AND s.query NOT LIKE '/* bench */%' ORDER BY s.calls DESC"
        )
        .fetchall()
    )
    return [
        (int(calls), f"[{ms:8.1f} ms, plan {plan:6.1f}] {str(text)[:100]}")
        for calls, ms, plan, text in rows
    ]


def _sessions(db: Database) -> int:
    return int(
        db.one(
            "/* bench */ SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
        )
    )


def _wal(db: Database) -> int:
    return int(db.one("/* bench */ SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))


class Fleet:
    def __init__(self, url: str, sampler: Sampler, fake: FakeService, db: Database) -> None:
        self.url = url
        self.sampler = sampler
        self.fake = fake
        self.db = db
        self.workers: list[asyncio.subprocess.Process] = []

    def worker_cpu(self) -> float:
        return sum(process_cpu(w.pid) for w in self.workers)

    def measuring(self, snapshot: Snapshot) -> float:
        return snapshot.by_kind.get("measuring (bench)", 0.0)

    async def phase(self, name: str, action: Any, done: Any, runs: Any) -> Phase:
        """Run `action`, poll `done()` every 0.5 s until true; the phase's figures."""
        assert self.fake.process is not None
        self.db.one("/* bench */ SELECT count(*) FROM (SELECT pg_stat_statements_reset()) r")
        sessions, wal = _sessions(self.db), _wal(self.db)
        fake = process_cpu(self.fake.process.pid)
        workers, pg = self.worker_cpu(), self.sampler.snapshot()
        start = time.perf_counter()
        await action()
        while not done():  # noqa: ASYNC110 - polling the database, as an operator would
            await asyncio.sleep(0.5)
        seconds = time.perf_counter() - start
        workers, pg = self.worker_cpu() - workers, self.sampler.snapshot().minus(pg)
        fake = process_cpu(self.fake.process.pid) - fake
        statements = _statements(self.db)
        timeline = (
            self.db.conn()
            .execute(
                "/* bench */ SELECT extract(epoch FROM min(started_at) - now())::float8,"
                " extract(epoch FROM max(finished_at) - now())::float8,"
                " percentile_cont(0.5) WITHIN GROUP (ORDER BY"
                " extract(epoch FROM finished_at - started_at)::float8),"
                " percentile_cont(0.9) WITHIN GROUP (ORDER BY"
                " extract(epoch FROM finished_at - started_at)::float8)"
                " FROM invoicing_runs WHERE started_at > now() - make_interval(secs => %s)",
                (time.perf_counter() - start,),
            )
            .fetchone()
        )
        if timeline and timeline[0] is not None:
            ago = time.perf_counter() - start
            print(
                f"   timeline: first run started at {ago + timeline[0]:.2f} s, last ended at"
                f" {ago + timeline[1]:.2f} s of {ago:.2f}; run p50 {timeline[2] * 1000:.0f} ms,"
                f" p90 {timeline[3] * 1000:.0f} ms",
                file=sys.stderr,
            )
        # the measurement's own two connections opened no session during the phase
        return Phase(
            name=name,
            runs=runs(),
            seconds=seconds,
            worker_cpu=workers,
            fake_cpu=fake,
            postgres=pg,
            measuring=self.measuring(pg),
            sessions=_sessions(self.db) - sessions,
            statements=statements,
            wal_bytes=_wal(self.db) - wal,
        )


def _print(phase: Phase) -> None:
    d = phase.as_dict()
    print(
        f"\n== {d['phase']}: {d['runs']} runs in {d['seconds']} s ({d['runs_per_minute']}/min);"
        f" worker {d['worker_cpu_ms_per_run']} ms, PostgreSQL {d['postgres_cpu_ms_per_run']} ms"
        f" per run (with the measurement's {d['postgres_cpu_with_measuring_ms_per_run']});"
        f" per second: worker {d['worker_cpu_per_second']}, PostgreSQL"
        f" {d['postgres_cpu_per_second']}; fake {d['fake_cpu_ms_per_run']} ms/run;"
        f" sessions {d['sessions']} ({d['sessions_per_run']}/run);"
        f" {d['statements_per_run']} statements/run; WAL {d['wal_kb_per_run']} kB/run",
        file=sys.stderr,
    )
    print("   PostgreSQL by kind (ms per run):", d["postgres_by_kind_ms_per_run"], file=sys.stderr)
    for per, text in d["statements"][:14]:
        print(f"   {per:8.3f}  {text}", file=sys.stderr)


async def measure(
    accounts: int, invoices: int, passes: int, idle: float, pause: float = 3.0
) -> list[Phase]:
    with (
        tempfile.TemporaryDirectory(prefix="bench-fleet-") as name,
        start_postgres(
            200,
            "shared_preload_libraries=pg_stat_statements",
            "pg_stat_statements.track=top",
            *(["pg_stat_statements.track_planning=on"] if os.environ.get("BENCH_PLANNING") else []),
        ) as pg,
    ):
        tmp = Path(name)
        fake = FakeService(accounts, invoices, tmp)
        await fake.start()
        with psycopg.connect(pg.url(), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "fleet"')
        url = pg.url("fleet")
        phases: list[Phase] = []
        workers: list[asyncio.subprocess.Process] = []
        try:
            await _cli(url, "db", "migrate")
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            await _add_accounts(url, fake.urls, tmp)
            db = Database(url)
            with Sampler(pg.process.pid, Database(url).describe) as sampler:
                fleet = Fleet(url, sampler, fake, db)
                for i in range(WORKERS):
                    workers.append(
                        await _python(
                            # $BENCH_JOBS_PROFILE=DIR: under cProfile (benchmarks.jobs_worker)
                            *(
                                ("-m", "benchmarks.jobs_worker", "worker", str(tmp / "b.log"))
                                if os.environ.get("BENCH_JOBS_PROFILE")
                                else ("-m", "invoicing_async")
                            ),
                            "worker",
                            "--database-url",
                            url,
                            "--concurrency",
                            str(CONCURRENCY),
                            "--metrics-port",
                            str(free_port()),
                            log=tmp / f"worker-{i}.log",
                        )
                    )
                fleet.workers = workers
                await asyncio.sleep(5)  # started, dispatched once, idle

                async def nothing() -> None:
                    await asyncio.sleep(idle)

                phases.append(await fleet.phase("idle", nothing, lambda: True, lambda: 0))
                _print(phases[-1])
                last = 0

                async def enqueue() -> None:
                    await _cli(url, "enqueue", "--all")

                def complete() -> bool:
                    n = db.one(
                        "/* bench */ SELECT count(DISTINCT account) FROM invoicing_runs"
                        " WHERE status = 'complete' AND id > %s",
                        (last,),
                    )
                    return int(n) >= accounts

                def runs() -> int:
                    return int(
                        db.one(
                            "/* bench */ SELECT count(*) FROM invoicing_runs WHERE id > %s", (last,)
                        )
                    )

                for n in range(passes + 1):
                    label = "first sync" if n == 0 else f"no change {n}"
                    phases.append(await fleet.phase(label, enqueue, complete, runs))
                    _print(phases[-1])
                    last = int(db.one("/* bench */ SELECT max(id) FROM invoicing_runs"))
                    await asyncio.sleep(pause)  # 70 s or more: autovacuum visits the tables
                refused = sum(c[1] for c in (await fake.counters()).values())
                overlaps = db.one(
                    "/* bench */ SELECT count(*) FROM invoicing_runs a JOIN invoicing_runs b"
                    " ON a.account = b.account AND a.id < b.id WHERE a.status <> 'locked'"
                    " AND b.status <> 'locked' AND b.started_at < coalesce(a.finished_at, now())"
                    " AND a.started_at < coalesce(b.finished_at, now())"
                )
                print(f"\n403s: {refused}; overlapping runs: {overlaps}", file=sys.stderr)
        finally:
            for w in workers:
                if w.returncode is None:
                    w.terminate()
            await asyncio.gather(*(w.wait() for w in workers))
            await fake.stop()
        return phases


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_fleet")
    parser.add_argument("--accounts", type=int, default=300)
    parser.add_argument("--invoices", type=int, default=100)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument(
        "--pause",
        type=float,
        default=3.0,
        help="seconds between passes (past a minute, autovacuum runs between them, as it "
        "does between an operator's bursts of runs)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault(SECRET_ENV, "bench-pw")
    phases = asyncio.run(measure(args.accounts, args.invoices, args.passes, args.idle, args.pause))
    if args.json:
        args.json.write_text(json.dumps([p.as_dict() for p in phases], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
