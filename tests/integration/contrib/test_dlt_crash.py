"""SIGKILL a dlt load at random points of its load step: the destination never holds
fewer invoices than before the load, nor any twice, for a reader at any point."""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import random
import shutil
import threading
from pathlib import Path

import dlt
import duckdb
import pytest

from invoicing_async import RateBudget
from invoicing_async.contrib.dlt import invoicing_source
from invoicing_async.testing import FakeInvoicingService
from tests import forked
from tests.integration.contrib import dlt_child
from tests.integration.contrib.dlt_child import COUNT
from tests.integration.contrib.test_dlt import change

pytestmark = [pytest.mark.slow, pytest.mark.reliability]

INVOICES = 600
KILLS = 6


class Load:
    """The child's load (tests/integration/contrib/dlt_child.py), statement by statement,
    in a process forked from the tests' forkserver (tests/forked.py): a fork, not a new
    interpreter importing dlt for each of the seven loads."""

    def __init__(self, service: FakeInvoicingService, folder: Path, database: Path) -> None:
        args = (service.base_url, service.username, service.password, str(folder), str(database))
        self.pipe, theirs = multiprocessing.Pipe()
        self.process = forked.context().Process(target=dlt_child.run, args=(args, theirs))
        self.process.start()
        theirs.close()  # the child's end is the child's alone: its death ends the pipe
        self.seen: list[tuple[int, int]] = []  # (rows, distinct ids) at each statement
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        with contextlib.suppress(EOFError, OSError):
            while True:
                self.lines.put(self.pipe.recv())
        self.lines.put("")

    def line(self) -> str:
        """The child's next line ("" at its end); a child silent for `forked.GUARD` hangs."""
        return self.lines.get(timeout=forked.GUARD)

    def until(self, wanted: str) -> bool:
        """Read up to the line `wanted` (False: the child ended first), noting row counts."""
        while line := self.line():
            if line.startswith("rows "):
                rows, distinct = map(int, line.split()[1:])
                self.seen.append((rows, distinct))
            elif line == wanted:
                return True
        return False

    def go(self) -> None:
        self.pipe.send("go")

    def statements(self, kill_at: int | None, *, during: bool) -> int:
        """Let the load run statement by statement; SIGKILL it before (or, `during`, just
        after letting go) the statement `kill_at`. The statements it reached."""
        assert self.until("loading")
        reached = 0
        while self.until("step"):
            reached += 1
            if reached == kill_at:
                if during:
                    self.go()
                self.process.kill()
                break
            self.go()
        self.process.join(forked.GUARD)
        self.reader.join(forked.GUARD)
        self.pipe.close()
        return reached


def counted(database: Path) -> tuple[int, int]:
    """(rows, distinct ids) of `invoices`, as the next process to open the file sees."""
    with duckdb.connect(str(database)) as connection:
        return connection.execute(COUNT).fetchone() or (0, 0)


def test_sigkill_during_the_load_never_leaves_fewer_or_doubled_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """600 invoices stored, 200 changed since: a pipeline with no state of its own
    loads them, SIGKILLed before or during a random statement of its load step in each of
    six runs. A reader sees 600 distinct rows at every statement, and so does the next
    process to open the file; the next run of the killed pipeline completes the load."""
    monkeypatch.setenv("DLT_DATA_DIR", str(tmp_path / "dlt"))
    monkeypatch.setenv("RUNTIME__DLTHUB_TELEMETRY", "false")
    rng = random.Random(42)
    full = tmp_path / "full.duckdb"
    with FakeInvoicingService(
        invoices=INVOICES, tls=False, limit=10**6
    ).serve_in_thread() as service:
        service.account.record_bodies = False
        pipeline = dlt.pipeline(
            pipeline_name="invoicing_full",
            pipelines_dir=str(tmp_path / "full"),
            destination=dlt.destinations.duckdb(str(full)),
            dataset_name="invoicing",
        )
        source = invoicing_source(
            base_url=service.base_url,
            username=service.username,
            password=service.password,
            budget=RateBudget(limit=10**5),
        )
        pipeline.run(source.with_resources("invoices"))
        change(service, 200, 0)
        assert counted(full) == (INVOICES, INVOICES)

        shutil.copy(full, tmp_path / "whole.duckdb")
        whole = Load(service, tmp_path / "whole", tmp_path / "whole.duckdb")
        steps = whole.statements(None, during=False)
        assert whole.process.exitcode == 0
        assert steps > 2
        assert set(whole.seen) == {(INVOICES, INVOICES)}

        for trial in range(KILLS):
            folder, database = tmp_path / f"killed-{trial}", tmp_path / f"killed-{trial}.duckdb"
            shutil.copy(full, database)
            load = Load(service, folder, database)
            kill_at, during = rng.randrange(1, steps + 1), rng.random() < 0.5
            assert load.statements(kill_at, during=during) == kill_at
            assert load.process.exitcode == -9
            assert set(load.seen) == {(INVOICES, INVOICES)}, (kill_at, during)
            assert counted(database) == (INVOICES, INVOICES), (kill_at, during)
