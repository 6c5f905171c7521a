"""A dlt load in a process of its own, for tests that SIGKILL it: a pipeline with no state
loads the `invoices` resource into a DuckDB file and stops before each SQL statement of
its load step, counting the committed rows of `invoices` first.

Lines out: `loading` (the load step begins), then per statement `rows N D` (rows and
distinct ids a reader sees) and `step`, after which it waits for a line in; `done` last.
Run as `python -m tests.integration.contrib.dlt_child URL USER PASSWORD DIR DATABASE`.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import dlt
from dlt.destinations.impl.duckdb.sql_client import DuckDbSqlClient

from invoicing_async import RateBudget
from invoicing_async.contrib.dlt import invoicing_source

COUNT = "SELECT COUNT(*), COUNT(DISTINCT id) FROM invoicing.invoices"


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(base_url: str, username: str, password: str, folder: str, database: str) -> None:
    pipeline = dlt.pipeline(
        pipeline_name="invoicing_test",
        pipelines_dir=folder,
        destination=dlt.destinations.duckdb(database),
        dataset_name="invoicing",
    )
    pipeline.config.restore_from_destination = False
    source = invoicing_source(
        base_url=base_url, username=username, password=password, budget=RateBudget(limit=10**5)
    )
    pipeline.extract(source.with_resources("invoices"))
    pipeline.normalize()
    with pipeline.sql_client() as reader:  # a connection of its own: committed rows only
        connection = reader.native_connection
        turn = threading.Lock()  # one statement at a time, whichever thread runs it
        query = DuckDbSqlClient.execute_query

        @contextlib.contextmanager
        def announced(
            client: DuckDbSqlClient, sql: Any, *args: Any, **kwargs: Any
        ) -> Iterator[Any]:
            with turn:
                rows, distinct = connection.execute(COUNT).fetchone() or (0, 0)
                say(f"rows {rows} {distinct}")
                say("step")
                sys.stdin.readline()
            with query(client, sql, *args, **kwargs) as cursor:
                yield cursor

        DuckDbSqlClient.execute_query = announced  # type: ignore[method-assign,assignment]
        say("loading")
        pipeline.load()
        DuckDbSqlClient.execute_query = query  # type: ignore[method-assign]
        rows, distinct = connection.execute(COUNT).fetchone() or (0, 0)
        say(f"rows {rows} {distinct}")
    say("done")


if __name__ == "__main__":
    main(*sys.argv[1:6])
