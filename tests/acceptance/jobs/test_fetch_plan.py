"""procrastinate's fetch stays on its indexes once VACUUM has found the jobs table empty
(issue #48): a small fleet's jobs table is empty between two bursts of runs, and from the
statistics of an empty table the planner joined the queued jobs to themselves by
sequential scans at every fetch (300 jobs: 16 ms of PostgreSQL CPU a fetch, not 0.5).
`db migrate` sets the fetch function's plans to avoid sequential scans."""

from __future__ import annotations

import psycopg
import pytest

from tests.acceptance.jobs.test_jobs import acli, query
from tests.events import DB_LOOK, until

pytestmark = pytest.mark.servers

JOBS = 60


def seq_scans(url: str) -> int:
    rows = query(
        url,
        "SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'procrastinate_jobs'",
    )
    return int(rows[0][0])


async def test_fetching_after_vacuum_of_the_empty_jobs_table_scans_no_table(
    empty_postgres_url: str,
) -> None:
    url = empty_postgres_url
    assert await acli("db", "migrate", url=url) == 0
    with psycopg.connect(url, autocommit=True) as conn:
        config = conn.execute(
            "SELECT proconfig FROM pg_proc WHERE proname = 'procrastinate_fetch_job_v2'"
        ).fetchone()
        assert config is not None
        assert "enable_seqscan=off" in (config[0] or [])
        conn.execute("VACUUM ANALYZE procrastinate_jobs")  # empty: the planner expects ~1 row
        conn.execute(
            "INSERT INTO procrastinate_jobs (queue_name, task_name, lock, queueing_lock, args)"
            " SELECT 'default', 'invoicing.sync_account', 'a' || g, 'a' || g, '{}'"
            " FROM generate_series(1, %s) g",
            (JOBS,),
        )
        worker = conn.execute("SELECT procrastinate_register_worker_v1()").fetchone()
        assert worker is not None
    before = seq_scans(url)
    with psycopg.connect(url, autocommit=True) as conn:  # its statistics flush as it ends
        for _ in range(JOBS):
            row = conn.execute(
                "SELECT id FROM procrastinate_fetch_job_v2(NULL, %s)", (worker[0],)
            ).fetchone()
            assert row is not None
            assert row[0] is not None
        conn.execute("SELECT pg_stat_force_next_flush()")
    # A backend's counters reach the shared statistics when it is idle or ends.
    await until(lambda: seq_scans(url) != before or _flushed(url), "the counters", look=DB_LOOK)
    assert seq_scans(url) == before


def _flushed(url: str) -> bool:
    """The fetches' index scans have been counted (so a sequential scan would be too)."""
    rows = query(
        url,
        "SELECT coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = 'procrastinate_jobs'",
    )
    return int(rows[0][0]) >= JOBS
