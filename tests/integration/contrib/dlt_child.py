"""A dlt load in a process of its own, for tests that SIGKILL it: a pipeline with no state
loads the `invoices` resource into a DuckDB file and stops before each SQL statement of
its load step, counting the committed rows of `invoices` first.

Forked from the tests' forkserver (tests/forked.py, which imported this module, dlt and
the package once), it speaks over a pipe: out `loading` (the load step begins), then per
statement `rows N D` (rows and distinct ids a reader sees) and `step`, after which it
waits for a message in; `done` last.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

import dlt
from dlt.destinations.impl.duckdb.sql_client import DuckDbSqlClient

from invoicing_async import RateBudget
from invoicing_async.contrib.dlt import invoicing_source

COUNT = "SELECT COUNT(*), COUNT(DISTINCT id) FROM invoicing.invoices"


def run(args: tuple[str, str, str, str, str], pipe: Connection) -> None:
    """The load of `args` (URL, user, password, folder, database), told through `pipe`."""
    base_url, username, password, folder, database = args
    os.environ["DLT_DATA_DIR"] = os.path.join(folder, "dlt")
    os.environ["RUNTIME__DLTHUB_TELEMETRY"] = "false"
    os.environ["LOAD__WORKERS"] = "1"
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
                pipe.send(f"rows {rows} {distinct}")
                pipe.send("step")
                pipe.recv()
            with query(client, sql, *args, **kwargs) as cursor:
                yield cursor

        DuckDbSqlClient.execute_query = announced  # type: ignore[method-assign,assignment]
        pipe.send("loading")
        pipeline.load()
        DuckDbSqlClient.execute_query = query  # type: ignore[method-assign]
        rows, distinct = connection.execute(COUNT).fetchone() or (0, 0)
        pipe.send(f"rows {rows} {distinct}")
    pipe.send("done")
