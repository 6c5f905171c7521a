"""`BlockingInvoicingClient` against the fake service: the operations, and where users run
it: threads, a running loop, a callback of its own loop, a forked child, many open/close
cycles, collection without close, the budget across threads and processes, a sync run."""

from __future__ import annotations

import asyncio
import collections.abc
import gc
import logging
import os
import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async.sync import SQLiteStore
from invoicing_async.testing import FakeInvoicingService


def blocking(service: FakeInvoicingService, **kwargs: Any) -> ia.BlockingInvoicingClient:
    kwargs.setdefault("format", "json")
    return ia.BlockingInvoicingClient(service.base_url, auth=service.auth, **kwargs)


def open_fds(service: FakeInvoicingService) -> int:
    """File descriptors this process holds, the service's own sockets left out (it serves
    from this process and closes its side of a connection when it reads the close)."""
    port = int(service.base_url.rsplit(":", 1)[1].split("/")[0])
    served = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    served.add(f"socket:[{fields[9]}]")
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the directory's own descriptor, closed by now
            continue
    return sum(link not in served for link in links)


@pytest.fixture
def quiet(caplog: pytest.LogCaptureFixture) -> Iterator[list[warnings.WarningMessage]]:
    """Every warning raised, and asyncio's logged errors ("Event loop is closed", unclosed
    session or connector) failing the test at its end."""
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.ERROR, "asyncio"):
        warnings.simplefilter("always")
        yield caught
        gc.collect()
    assert [str(w.message) for w in caught] == []
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def test_every_kind_of_operation_blocks_and_returns_the_async_results(
    service_in_thread: FakeInvoicingService, quiet: list[warnings.WarningMessage]
) -> None:
    with blocking(service_in_thread) as client:
        assert client.current_session().email == "api-user@example.com"
        assert client.invoices.get(1).id == 1
        listed = client.invoices.iter()
        assert isinstance(listed, collections.abc.Iterator)
        assert [inv.id for inv in listed] == [inv.id for inv in client.invoices.list()]
        line = m.InvoiceDetail(description="Work", price=Decimal("10.00"), tax_rate_id=1)
        inv = client.invoices.create(m.Invoice(contact_id=7, details=[line]))
        inv = client.invoices.send_invoice(inv, send_method="email")
        assert inv.state == "open"
        with pytest.raises(ia.NotFoundError):
            client.invoices.get(999)
        raw = client.invoices.with_raw_response.get(1)
        assert (raw.status_code, raw.parse().id) == (200, 1)
        assert client.with_raw_response.current_session().status_code == 200
        fast = client.with_options(max_wait=0)
        assert fast.invoices.get(2).id == 2
        assert fast.requests_sent == client.requests_sent  # one client, one session
    assert client.is_closed


def test_a_thread_running_a_loop_can_call_it(
    service_in_thread: FakeInvoicingService, quiet: list[warnings.WarningMessage]
) -> None:
    """A notebook cell: a blocking call while this thread's loop runs neither raises
    "cannot be called from a running event loop" nor deadlocks."""

    async def cell(client: ia.BlockingInvoicingClient) -> list[int | None]:
        return [client.invoices.get(1).id, *(inv.id for inv in client.invoices.iter())]

    with blocking(service_in_thread) as client:
        assert asyncio.run(cell(client)) == [1, 1, 2, 3]
        assert client.invoices.get(2).id == 2  # and then from this thread, with no loop


def test_a_call_from_its_own_loop_is_refused_clearly(
    service_in_thread: FakeInvoicingService,
) -> None:
    errors: list[BaseException] = []
    holder: list[ia.BlockingInvoicingClient] = []

    def on_request(event: ia.RequestEvent) -> None:
        if not errors:
            try:
                holder[0].invoices.get(2)
            except RuntimeError as exc:
                errors.append(exc)

    with blocking(service_in_thread, on_request=on_request) as client:
        holder.append(client)
        assert client.invoices.get(1).id == 1
    assert len(errors) == 1
    assert "from inside its own event loop" in str(errors[0])


def test_sixteen_threads_share_one_client(
    service_in_thread: FakeInvoicingService, quiet: list[warnings.WarningMessage]
) -> None:
    threads_before, fds_before = threading.active_count(), open_fds(service_in_thread)
    calls = 5
    results: list[int] = []
    failures: list[BaseException] = []
    with blocking(service_in_thread) as client:
        start = threading.Barrier(16)

        def work() -> None:
            start.wait()
            try:
                for i in range(calls):
                    results.append(client.invoices.get(1 + i % 3).id or 0)
            except BaseException as exc:
                failures.append(exc)

        workers = [threading.Thread(target=work) for _ in range(16)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert failures == []
        assert sorted(results) == sorted([1 + i % 3 for i in range(calls)] * 16)
        assert client.requests_sent == 16 * calls
    assert threading.active_count() <= threads_before
    assert open_fds(service_in_thread) <= fds_before


def test_sixteen_threads_never_exceed_the_budget(
    service_in_thread: FakeInvoicingService,
) -> None:
    """20 requests an hour, 16 threads asking 3 times: 20 answered, 28 refused at once
    with `RateLimitExceeded`, and the service saw 20."""
    budget = ia.RateBudget(limit=20, period=3600.0)
    seen_before = service_in_thread.account.requests_total
    outcomes: list[str] = []
    with blocking(service_in_thread, budget=budget, max_wait=0) as client:
        start = threading.Barrier(16)

        def work() -> None:
            start.wait()
            for _ in range(3):
                try:
                    client.invoices.get(1)
                    outcomes.append("ok")
                except ia.RateLimitExceeded:
                    outcomes.append("refused")

        workers = [threading.Thread(target=work) for _ in range(16)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert sorted(outcomes) == ["ok"] * 20 + ["refused"] * 28
    assert service_in_thread.account.requests_total - seen_before == 20


#: How long a forked child may take before SIGALRM ends it (each needs well under a second).
CHILD_SECONDS = 60


def _in_children(count: int, work: Callable[[], str]) -> list[str]:
    """`work()` in `count` forked children at once; what each wrote back."""
    children = []
    for _ in range(count):
        read, write = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12+ warns of any fork of a threaded process (here the fake's thread):
            # forking such a process is what Celery's prefork pool does, and under test.
            warnings.filterwarnings(
                "ignore", "This process .* is multi-threaded", DeprecationWarning
            )
            pid = os.fork()
        if pid == 0:  # the child
            os.close(read)
            signal.alarm(CHILD_SECONDS)  # a child that hangs ends, and its answer is empty
            try:
                answer = work()
            except BaseException as exc:
                answer = f"{type(exc).__name__}: {exc}"
            os.write(write, answer.encode())
            os._exit(0)
        os.close(write)
        children.append((pid, read))
    answers = []
    for pid, read in children:
        with os.fdopen(read, "rb") as pipe:
            answers.append(pipe.read().decode())
        os.waitpid(pid, 0)
    return answers


def test_four_processes_with_a_shared_budget_never_exceed_it(
    service_in_thread: FakeInvoicingService,
    shared_budget_url: str,
    tmp_path: Path,
    quiet: list[warnings.WarningMessage],
) -> None:
    """One client made before the fork (as a Celery or gunicorn --preload module does),
    four children spending a budget of 12 shared through each store, with 5 calls each.
    Each child opens connections of its own: on the parent's (PostgreSQL, Redis) a child
    failed calls with `BudgetUnavailableError` and left the parent's store broken."""
    budget = ia.RateBudget(
        limit=12, shared=shared_budget_url, key=f"acme-{tmp_path.name}"
    )  # unique per test
    seen_before = service_in_thread.account.requests_total
    with blocking(service_in_thread, budget=budget, max_wait=0) as client:
        assert client.invoices.get(1).id == 1  # the parent's loop, session, budget thread

        def work() -> str:
            outcomes = []
            for _ in range(5):
                try:
                    client.invoices.get(2)
                    outcomes.append("o")
                except ia.RateLimitExceeded:
                    outcomes.append("r")
            return "".join(outcomes)

        answers = _in_children(4, work)
        with pytest.raises(ia.RateLimitExceeded):  # the parent sees what the children spent
            client.invoices.get(3)
    assert all(set(a) <= {"o", "r"} for a in answers), answers
    assert sum(a.count("o") for a in answers) == 11  # 12 less the parent's first call
    assert service_in_thread.account.requests_total - seen_before <= 12


def test_a_forked_child_gets_its_own_loop_and_the_parent_keeps_its_connection(
    service_in_thread: FakeInvoicingService, quiet: list[warnings.WarningMessage]
) -> None:
    connections = 0

    async def created(*_: object) -> None:
        nonlocal connections
        connections += 1

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(created)
    with blocking(service_in_thread, trace_configs=[trace]) as client:
        assert client.invoices.get(1).id == 1
        answers = _in_children(
            2, lambda: f"{client.invoices.get(2).id} {[i.id for i in client.invoices.iter()]}"
        )
        assert answers == ["2 [1, 2, 3]"] * 2
        assert client.invoices.get(3).id == 3
        assert connections == 1  # the parent's connection was never closed under it


def open_close_cycles(service: FakeInvoicingService, cycles: int) -> None:
    threads_before, fds_before = threading.active_count(), open_fds(service)
    for i in range(cycles):
        with blocking(service) as client:
            assert client.invoices.get(1 + i % 3).id == 1 + i % 3
        if i % 100 == 99:
            gc.collect()
    gc.collect()
    assert threading.active_count() <= threads_before
    assert open_fds(service) <= fds_before


def test_open_close_cycles_leave_no_warnings_threads_or_fds(
    service_in_thread: FakeInvoicingService, quiet: list[warnings.WarningMessage]
) -> None:
    open_close_cycles(service_in_thread, 300)


@pytest.mark.stress
@pytest.mark.slow
def test_ten_thousand_open_close_cycles(quiet: list[warnings.WarningMessage]) -> None:
    service = FakeInvoicingService(invoices=3, tls=False, limit=20_000)
    with service.serve_in_thread():
        open_close_cycles(service, 10_000)


def test_a_client_collected_without_close_closes_quietly(
    service_in_thread: FakeInvoicingService, quiet: list[warnings.WarningMessage]
) -> None:
    threads_before, fds_before = threading.active_count(), open_fds(service_in_thread)
    client = blocking(service_in_thread)
    assert [inv.id for inv in client.with_options(timeout=5).invoices.iter()] == [1, 2, 3]
    del client
    gc.collect()
    assert threading.active_count() <= threads_before
    assert open_fds(service_in_thread) <= fds_before


def test_a_closed_client_says_so(service_in_thread: FakeInvoicingService) -> None:
    client = blocking(service_in_thread)
    client.close()
    with pytest.raises(RuntimeError, match="closed"):
        client.invoices.get(1)


def test_a_sync_run_and_the_stored_copy_from_blocking_code(
    service_in_thread: FakeInvoicingService, tmp_path: Path, quiet: list[warnings.WarningMessage]
) -> None:
    path = tmp_path / "invoices.sqlite3"
    with blocking(service_in_thread) as client:
        store = client.store(lambda: SQLiteStore(path))
        report = client.sync(store)
        assert (report.listed, report.created, report.complete) == (3, 3, True)
        stored = store.get(2)
        assert stored is not None
        assert stored.id == 2
        assert sorted(store.revisions()) == [1, 2, 3]
        assert [inv.id for inv in store.iter_invoices()] == [1, 2, 3]
        assert client.sync(store).created == 0


def test_a_forked_child_syncs_and_reads_the_stored_copy(
    service_in_thread: FakeInvoicingService, tmp_path: Path, quiet: list[warnings.WarningMessage]
) -> None:
    """A Celery task in a prefork child runs a sync of the module's store: the parent's
    thread pools (SQLite's, decoding's) have no threads in the child and are made anew,
    where before the child queued its first store call on a pool thread that did not exist
    and hung."""
    path = tmp_path / "invoices.sqlite3"
    with blocking(service_in_thread) as client:
        store = client.store(lambda: SQLiteStore(path))
        assert client.sync(store).created == 3

        def work() -> str:
            report = client.sync(store)
            stored = store.get(2)
            return f"{report.listed} {report.unchanged} {stored.id if stored else None}"

        assert _in_children(2, work) == ["3 3 2"] * 2
        assert client.sync(store).unchanged == 3  # the parent's store still works
