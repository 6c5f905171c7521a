"""The dlt source: real pipelines against the fake service into DuckDB in a tmp dir."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import math
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import dlt
import pytest
from dlt.pipeline.exceptions import PipelineStepFailed

from invoicing_async import RateBudget
from invoicing_async._models import export
from invoicing_async.contrib.dlt import invoicing_source
from invoicing_async.models import (
    CurrentSession,
    Invoice,
    InvoiceDetail,
    InvoiceHistoryRecord,
    InvoicePayment,
    RecurringTemplate,
    RecurringTemplateDetail,
)
from invoicing_async.testing import FakeClock, FakeInvoicingService, populate

pytestmark = pytest.mark.slow  # dlt pipelines on DuckDB, seconds each

INVOICES = 250


@pytest.fixture
def service() -> Iterator[FakeInvoicingService]:
    with FakeInvoicingService(
        invoices=INVOICES, tls=False, limit=10**6
    ).serve_in_thread() as service:
        service.account.record_bodies = False
        yield service


@pytest.fixture
def pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dlt.Pipeline:
    """A DuckDB pipeline whose files all stay in tmp_path; no telemetry."""
    monkeypatch.setenv("DLT_DATA_DIR", str(tmp_path / "dlt"))
    monkeypatch.setenv("RUNTIME__DLTHUB_TELEMETRY", "false")
    return dlt.pipeline(
        pipeline_name="invoicing_test",
        pipelines_dir=str(tmp_path / "pipelines"),
        destination=dlt.destinations.duckdb(str(tmp_path / "invoices.duckdb")),
        dataset_name="invoicing",
    )


def load(pipeline: dlt.Pipeline, service: FakeInvoicingService, **options: Any) -> dict[str, int]:
    """Run the source once; the requests it sent, by kind."""
    options.setdefault("budget", RateBudget(limit=100_000))
    source = invoicing_source(
        base_url=service.base_url,
        username=service.username,
        password=service.password,
        **options,
    )
    before = len(service.account.requests)
    pipeline.run(source)
    sent = [r.path for r in service.account.requests[before:]]
    return {
        "list": sum("sync_list_ids" in p for p in sent),
        "fetch": sum("sync_fetch_ids" in p for p in sent),
        "all": len(sent),
    }


def query(pipeline: dlt.Pipeline, sql: str) -> list[tuple[Any, ...]]:
    with pipeline.sql_client() as client:
        return [tuple(row) for row in client.execute_sql(sql) or []]


def merged(pipeline: dlt.Pipeline) -> bool:
    """Whether the last load merged the invoices' tables (dlt's merge statements, against
    tables written anew)."""
    trace = pipeline.last_trace
    assert trace is not None
    assert trace.last_load_info is not None
    jobs = trace.last_load_info.load_packages[0].jobs["completed_jobs"]
    formats = {
        j.job_file_info.file_format for j in jobs if "invoices" in j.job_file_info.table_name
    }
    assert "parquet" in formats
    return "sql" in formats


def current(pipeline: dlt.Pipeline, *, scd2: bool = False) -> dict[int, int]:
    where = " WHERE _dlt_valid_to IS NULL" if scd2 else ""
    return dict(query(pipeline, f"SELECT id, revision FROM invoices{where}"))


def on_service(service: FakeInvoicingService) -> dict[int, int]:
    return {i: inv.revision or 0 for i, inv in service.account.invoices.items()}


def service_total(service: FakeInvoicingService, name: str) -> Decimal:
    return sum(
        (getattr(i, name) or Decimal(0) for i in service.account.invoices.values()), Decimal(0)
    )


def change(
    service: FakeInvoicingService, count: int, deletions: int
) -> tuple[list[int], list[int]]:
    """Change `count` invoices (new line prices and payments: new totals), delete others."""
    account = service.account
    service.clock.advance(60)
    ids = sorted(account.invoices)
    changed, deleted = ids[:count], ids[-deletions:] if deletions else []
    for n, ident in enumerate(changed):
        line = account.invoices[ident].details[0]
        if n % 2:
            account.update_invoice(ident, {"details": [{"id": line.id, "price": Decimal("19.99")}]})
        else:
            payment = InvoicePayment(price=Decimal("0.01"), payment_method="bank_transfer")
            account.register_payment(ident, payment)
    for ident in deleted:
        account.delete_invoice(ident)
    service.clock.advance(2)  # read after the revisions' second: no rechecks
    return changed, deleted


def assert_totals_match(
    pipeline: dlt.Pipeline, service: FakeInvoicingService, where: str = ""
) -> None:
    for name in ("total_price_incl_tax", "total_paid", "total_unpaid"):
        [(loaded,)] = query(pipeline, f"SELECT SUM({name}) FROM invoices{where}")
        assert isinstance(loaded, Decimal)  # DECIMAL in DuckDB, never a float
        assert loaded == service_total(service, name), name


CHILD_KEYS = {"_dlt_id", "_dlt_parent_id", "_dlt_root_id", "_dlt_list_idx"}


def columns_of(pipeline: dlt.Pipeline, table: str) -> set[str]:
    found = query(
        pipeline,
        "SELECT column_name FROM information_schema.columns "
        f"WHERE table_schema = 'invoicing' AND table_name = '{table}'",
    )
    return {name for (name,) in found}


def assert_the_documented_columns_from_parquet(
    pipeline: dlt.Pipeline, service: FakeInvoicingService, *, scd2: bool
) -> None:
    """After a load of changes and deletions: the guide's list of columns, no more (the
    models' columns, `extra`, and dlt's keys; no marker column (`_deleted`) and no marker
    row); every child row joins its invoice row; the load files are Parquet."""
    trace = pipeline.last_trace
    assert trace is not None
    assert trace.last_load_info is not None
    jobs = trace.last_load_info.load_packages[0].jobs["completed_jobs"]
    files = {j.job_file_info.file_format for j in jobs if "invoices" in j.job_file_info.table_name}
    assert files == {"parquet", "sql"}  # the rows, and dlt's merge statements
    validity = {"_dlt_valid_from", "_dlt_valid_to"} if scd2 else set()
    models = {
        "invoices": Invoice,
        "details": InvoiceDetail,
        "payments": InvoicePayment,
        "history": InvoiceHistoryRecord,
    }
    for name, cls in models.items():
        table = name if name == "invoices" else f"invoices__{name}"
        scalars = set(export.scalar_columns(cls)) - {"destroy"}
        keys = {"_dlt_id"} | validity if cls is Invoice else CHILD_KEYS
        assert columns_of(pipeline, table) == scalars | {"extra"} | keys, table
        assert query(pipeline, f"SELECT COUNT(*) FROM {table} WHERE _dlt_id LIKE '-%'") == [(0,)]
        if cls is not Invoice:
            orphans = query(
                pipeline,
                f"SELECT COUNT(*) FROM {table} AS c LEFT JOIN invoices AS i "
                "ON c._dlt_root_id = i._dlt_id WHERE i._dlt_id IS NULL",
            )
            assert orphans == [(0,)], table

    # The guide's join, in list order.
    joined = query(
        pipeline,
        "SELECT i.id, i.invoice_id, d.description, d.price FROM invoices AS i "
        "JOIN invoices__details AS d ON d._dlt_root_id = i._dlt_id "
        + ("WHERE i._dlt_valid_to IS NULL " if scd2 else "")
        + "ORDER BY i.id, d._dlt_list_idx",
    )
    lines = [
        (i.id, i.invoice_id, line.description, line.price)
        for i in sorted(service.account.invoices.values(), key=lambda i: i.id or 0)
        for line in i.details
    ]
    assert joined == lines


def assert_schema_types_money_dates_and_timestamps(pipeline: dlt.Pipeline) -> None:
    types = dict(
        query(
            pipeline,
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'invoicing' AND table_name = 'invoices'",
        )
    )
    assert types["total_price_incl_tax"] == "DECIMAL(18,4)"
    assert types["exchange_rate"] == "DECIMAL(18,8)"
    assert types["invoice_date"] == "DATE"
    assert types["created_at"] == "TIMESTAMP WITH TIME ZONE"
    assert types["revision"] == "BIGINT"
    [(price_type,)] = query(
        pipeline,
        "SELECT data_type FROM information_schema.columns "
        "WHERE table_schema = 'invoicing' AND table_name = 'invoices__payments' "
        "AND column_name = 'price'",
    )
    assert price_type == "DECIMAL(18,4)"
    [(first,)] = query(pipeline, "SELECT MIN(invoice_date) FROM invoices")
    assert isinstance(first, dt.date)


def test_first_load_then_changes_and_deletions(
    service: FakeInvoicingService, pipeline: dlt.Pipeline, tmp_path: Path
) -> None:
    first = load(pipeline, service)
    assert first == {"list": 1, "fetch": math.ceil(INVOICES / 100), "all": 1 + 3 + 2}
    assert not merged(pipeline)  # nothing stored yet: the tables are written anew
    assert current(pipeline) == on_service(service)
    assert_totals_match(pipeline, service)
    assert_schema_types_money_dates_and_timestamps(pipeline)
    [(lines,)] = query(pipeline, "SELECT COUNT(*) FROM invoices__details")
    assert lines == sum(len(i.details) for i in service.account.invoices.values())

    changed, deleted = change(service, 150, 3)
    second = load(pipeline, service)
    assert merged(pipeline)
    assert second["list"] == 1
    assert second["fetch"] == math.ceil(len(changed) / 100)  # 1 + 2 requests for 150
    assert current(pipeline) == on_service(service)  # rows updated, deleted ones removed
    assert not set(deleted) & set(current(pipeline))
    assert_totals_match(pipeline, service)
    [(payments,)] = query(pipeline, "SELECT COUNT(*) FROM invoices__payments")
    assert payments == sum(len(i.payments) for i in service.account.invoices.values())
    # The nested rows of a changed or deleted invoice are replaced with it.
    [(lines,)] = query(pipeline, "SELECT COUNT(*) FROM invoices__details")
    assert lines == sum(len(i.details) for i in service.account.invoices.values())
    assert_the_documented_columns_from_parquet(pipeline, service, scd2=False)

    third = load(pipeline, service)
    assert (third["list"], third["fetch"]) == (1, 0)  # nothing changed: the list alone

    # A machine with no pipeline directory (a fresh CI runner) loading into the same
    # destination fetches nothing: the plan compares with what the destination holds.
    elsewhere = dlt.pipeline(
        pipeline_name="invoicing_test",
        pipelines_dir=str(tmp_path / "another-machine"),
        destination=dlt.destinations.duckdb(str(tmp_path / "invoices.duckdb")),
        dataset_name="invoicing",
    )
    assert load(elsewhere, service)["fetch"] == 0
    assert current(elsewhere) == on_service(service)


def test_scd2_keeps_each_revision_and_closes_deleted_invoices(
    service: FakeInvoicingService, pipeline: dlt.Pipeline
) -> None:
    load(pipeline, service, scd2=True)
    assert merged(pipeline)  # even the first load: the merge sets the validity columns
    assert query(pipeline, "SELECT COUNT(*) FROM invoices WHERE _dlt_valid_from IS NULL") == [(0,)]
    assert current(pipeline, scd2=True) == on_service(service)
    before = dict(query(pipeline, "SELECT id, revision FROM invoices"))

    changed, deleted = change(service, 20, 2)
    second = load(pipeline, service, scd2=True)
    assert (second["list"], second["fetch"]) == (1, 1)
    assert_the_documented_columns_from_parquet(pipeline, service, scd2=True)
    assert current(pipeline, scd2=True) == on_service(service)
    assert_totals_match(pipeline, service, " WHERE _dlt_valid_to IS NULL")
    closed = query(pipeline, "SELECT id, revision FROM invoices WHERE _dlt_valid_to IS NOT NULL")
    # The old version of each changed invoice and the last of each deleted one, closed.
    assert sorted(closed) == sorted((i, before[i]) for i in changed + deleted)
    [(rows,)] = query(pipeline, "SELECT COUNT(*) FROM invoices")
    assert rows == INVOICES + len(changed)

    # The guide's join: each version's lines by the root key.
    [(lines,)] = query(
        pipeline,
        "SELECT COUNT(*) FROM invoices__details AS d JOIN invoices AS i "
        "ON d._dlt_root_id = i._dlt_id WHERE i._dlt_valid_to IS NULL",
    )
    assert lines == sum(len(i.details) for i in service.account.invoices.values())

    third = load(pipeline, service, scd2=True)
    assert (third["list"], third["fetch"]) == (1, 0)
    [(rows,)] = query(pipeline, "SELECT COUNT(*) FROM invoices")
    assert rows == INVOICES + len(changed)


def test_invoices_read_within_their_revision_second_are_read_once_more(
    pipeline: dlt.Pipeline,
) -> None:
    """Revisions are whole seconds: an invoice read in the second of its revision may
    change again under the same revision, so the next load fetches it again (once)."""
    with FakeInvoicingService(tls=False, clock=FakeClock(frozen=True)).serve_in_thread() as service:
        service.account.record_bodies = False
        populate(service.account, 5)
        ids = sorted(service.account.invoices)
        load(pipeline, service)
        service.account.mutate(ids[0])  # at the clock's second, which does not move
        assert load(pipeline, service)["fetch"] == 1
        assert load(pipeline, service)["fetch"] == 1  # read again: still within the second
        service.clock.advance(1)
        assert load(pipeline, service)["fetch"] == 1  # read again, now after the second
        assert load(pipeline, service)["fetch"] == 0
        assert current(pipeline) == on_service(service)


def test_every_dlt_refresh_reloads_everything(
    service: FakeInvoicingService, pipeline: dlt.Pipeline
) -> None:
    """Each refresh in turn on the same pipeline, the runs between them fetching nothing."""
    load(pipeline, service)
    for refresh in ["drop_sources", "drop_resources", "drop_data"]:
        source = invoicing_source(
            base_url=service.base_url,
            username=service.username,
            password=service.password,
            budget=RateBudget(limit=100_000),
        )
        pipeline.run(source, refresh=refresh)  # type: ignore[arg-type]
        assert not merged(pipeline), refresh
        assert current(pipeline) == on_service(service), refresh
        assert_totals_match(pipeline, service)
        assert load(pipeline, service)["fetch"] == 0, refresh


def test_any_auth_and_a_private_ca_connect(
    pipeline: dlt.Pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OAuth 1 through `auth=`, over HTTPS whose CA is trusted with `ssl=`, or with
    `ca_file` from dlt's config."""
    with FakeInvoicingService(invoices=20, oauth1=True).serve_in_thread() as service:
        service.write_ca(tmp_path / "ca.pem")
        monkeypatch.setenv("SOURCES__INVOICING__CA_FILE", str(tmp_path / "ca.pem"))
        sources = [
            invoicing_source(
                base_url=service.base_url,
                auth=service.oauth1_auth,
                ssl=service.ssl_context,
                budget=RateBudget(limit=100_000),
            ),
            invoicing_source(
                base_url=service.base_url,
                auth=service.oauth1_auth,
                budget=RateBudget(limit=100_000),
            ),
        ]
        for source in sources:
            pipeline.run(source.with_resources("invoices"))
            assert current(pipeline) == on_service(service)


def test_a_dropped_invoices_table_is_loaded_again(
    service: FakeInvoicingService, pipeline: dlt.Pipeline
) -> None:
    load(pipeline, service)
    with pipeline.sql_client() as client:
        client.drop_tables("invoices")
    assert load(pipeline, service)["fetch"] == math.ceil(INVOICES / 100)
    assert not merged(pipeline)
    assert current(pipeline) == on_service(service)
    assert_totals_match(pipeline, service)
    [(lines,)] = query(pipeline, "SELECT COUNT(*) FROM invoices__details")
    assert lines == sum(len(i.details) for i in service.account.invoices.values())
    assert load(pipeline, service)["fetch"] == 0


def test_a_reset_destination_gets_a_full_load(
    service: FakeInvoicingService, pipeline: dlt.Pipeline
) -> None:
    load(pipeline, service)
    with pipeline.sql_client() as client:
        client.drop_dataset()
    again = load(pipeline, service)
    assert again["fetch"] == math.ceil(INVOICES / 100)
    assert not merged(pipeline)
    assert current(pipeline) == on_service(service)
    assert_totals_match(pipeline, service)


def stateless(tmp_path: Path, folder: str = "no-state") -> dlt.Pipeline:
    """A pipeline on the fixture's dataset with no state of its own, none restored."""
    pipeline = dlt.pipeline(
        pipeline_name="invoicing_test",
        pipelines_dir=str(tmp_path / folder),
        destination=dlt.destinations.duckdb(str(tmp_path / "invoices.duckdb")),
        dataset_name="invoicing",
    )
    pipeline.config.restore_from_destination = False
    return pipeline


def test_a_pipeline_without_its_state_plans_against_what_the_destination_holds(
    service: FakeInvoicingService, pipeline: dlt.Pipeline, tmp_path: Path
) -> None:
    """A pipeline that does not restore its state from the destination reads what the
    destination holds, as any other: it fetches the changed invoices alone, merges them
    and deletes those gone, so no invoice is held twice and none deleted since stays."""
    load(pipeline, service)
    _, deleted = change(service, 10, 3)
    other = stateless(tmp_path)
    assert load(other, service)["fetch"] == 1
    assert merged(other)
    [(rows,)] = query(other, "SELECT COUNT(*) FROM invoices")
    assert rows == INVOICES - len(deleted)
    assert current(other) == on_service(service)
    [(lines,)] = query(other, "SELECT COUNT(*) FROM invoices__details")
    assert lines == sum(len(i.details) for i in service.account.invoices.values())


def test_a_pipeline_without_state_stopped_by_the_budget_keeps_every_stored_row(
    pipeline: dlt.Pipeline, tmp_path: Path
) -> None:
    """500 invoices in the destination, 300 changed since, and a pipeline with no state
    whose budget (3: the list and 2 batches) stops it part-way: the 200 it fetched are
    merged and every other row stays; the next run fetches the rest."""
    with FakeInvoicingService(invoices=500, tls=False, limit=10**6).serve_in_thread() as service:
        service.account.record_bodies = False
        load(pipeline, service)
        before = current(pipeline)
        change(service, 300, 0)
        other = stateless(tmp_path)
        source = invoicing_source(
            base_url=service.base_url,
            username=service.username,
            password=service.password,
            budget=RateBudget(limit=3),
        )
        other.run(source.with_resources("invoices"))
        assert query(other, "SELECT COUNT(*), COUNT(DISTINCT id) FROM invoices") == [(500, 500)]
        after = current(other)
        assert after.keys() == before.keys()
        assert sum(after[i] != before[i] for i in after) == 200
        assert all(after[i] in (before[i], r) for i, r in on_service(service).items())
        assert load(stateless(tmp_path, "another"), service)["fetch"] == 1
        assert current(pipeline) == on_service(service)
        assert_totals_match(pipeline, service)


def test_a_load_extracted_without_a_destination_is_merged_where_it_lands(
    service: FakeInvoicingService, pipeline: dlt.Pipeline, tmp_path: Path
) -> None:
    """Extracted with no destination known, a load is never written anew: one the budget
    stops after 200 invoices, loaded later into a destination that holds all 250, leaves
    the other 50 there."""
    load(pipeline, service)
    detached = dlt.pipeline(
        pipeline_name="invoicing_detached", pipelines_dir=str(tmp_path / "detached")
    )
    source = invoicing_source(
        base_url=service.base_url,
        username=service.username,
        password=service.password,
        budget=RateBudget(limit=3),
    )
    detached.extract(source.with_resources("invoices"))
    detached.run(  # the extracted package, normalized and loaded
        destination=dlt.destinations.duckdb(str(tmp_path / "invoices.duckdb")),
        dataset_name="invoicing",
    )
    assert current(pipeline) == on_service(service)


def test_an_interrupted_first_load_resumes_without_duplicates(
    service: FakeInvoicingService, pipeline: dlt.Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load of `invoices__payments` fails after the other tables were written; the
    next run completes the pending package (no table emptied or written twice), and the
    one after fetches nothing."""
    from dlt.destinations.impl.duckdb.duck import DuckDbCopyJob

    monkeypatch.setenv("LOAD__RAISE_ON_MAX_RETRIES", "1")
    copy = DuckDbCopyJob.run
    failed: list[str] = []

    def fail_once(job: DuckDbCopyJob) -> None:
        if job.load_table_name == "invoices__payments" and not failed:
            failed.append(job.load_table_name)
            raise RuntimeError("disk full")
        copy(job)

    monkeypatch.setattr(DuckDbCopyJob, "run", fail_once)
    with pytest.raises(PipelineStepFailed):
        load(pipeline, service)
    assert failed
    assert pipeline.has_pending_data
    assert len(current(pipeline)) == INVOICES  # written before the failure

    before = len(service.account.requests)
    pipeline.run()  # what any next run does first: the pending package, nothing fetched
    assert len(service.account.requests) == before
    for table, count in [
        ("invoices", INVOICES),
        ("invoices__details", sum(len(i.details) for i in service.account.invoices.values())),
        ("invoices__payments", sum(len(i.payments) for i in service.account.invoices.values())),
    ]:
        assert query(pipeline, f"SELECT COUNT(*), COUNT(DISTINCT _dlt_id) FROM {table}") == [
            (count, count)
        ], table
    assert current(pipeline) == on_service(service)
    assert load(pipeline, service)["fetch"] == 0


def test_the_budget_stops_the_load_and_the_next_run_resumes(
    service: FakeInvoicingService, pipeline: dlt.Pipeline
) -> None:
    """Every request takes a unit of our budget: with 3, the list and two batches go, the
    load keeps them, and the next run fetches only the 50 left."""
    source = invoicing_source(
        base_url=service.base_url,
        username=service.username,
        password=service.password,
        budget=RateBudget(limit=3),
    ).with_resources("invoices")
    before = len(service.account.requests)
    pipeline.run(source)
    assert len(service.account.requests) - before == 3
    assert len(current(pipeline)) == 200

    resumed = load(pipeline, service)
    assert resumed["fetch"] == 1
    assert current(pipeline) == on_service(service)


def test_waiting_for_the_budget_loads_everything_in_one_run(
    service: FakeInvoicingService, pipeline: dlt.Pipeline
) -> None:
    """With `wait_for_budget=True` the load waits for units to come back instead of
    stopping: 3 units a short period, 4 requests (the list and three batches), one run."""
    budget = RateBudget(limit=3, period=0.5)
    source = invoicing_source(
        base_url=service.base_url,
        username=service.username,
        password=service.password,
        budget=budget,
        wait_for_budget=True,
    ).with_resources("invoices")
    before = len(service.account.requests)
    started = time.monotonic()
    pipeline.run(source)
    assert time.monotonic() - started >= 0.5  # the fourth request waited for a unit
    assert len(service.account.requests) - before == 1 + math.ceil(INVOICES / 100)
    assert current(pipeline) == on_service(service)


def test_a_shared_budget_counts_the_requests(
    service: FakeInvoicingService, pipeline: dlt.Pipeline, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    sent = load(pipeline, service, budget=None, budget_url=url)

    async def remaining() -> int:
        budget = RateBudget(shared=url, key=service.base_url.split("://", 1)[1])
        try:
            await budget.refresh()
            return budget.snapshot().remaining
        finally:
            await budget.close()

    assert asyncio.run(remaining()) == 350 - sent["all"]


def test_credentials_come_from_dlt_config_and_secrets(
    service: FakeInvoicingService, pipeline: dlt.Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCES__INVOICING__BASE_URL", service.base_url)
    monkeypatch.setenv("SOURCES__INVOICING__USERNAME", service.username)
    monkeypatch.setenv("SOURCES__INVOICING__PASSWORD", service.password)
    pipeline.run(invoicing_source(budget=RateBudget(limit=100_000)))
    assert current(pipeline) == on_service(service)
    [(user,)] = query(pipeline, "SELECT email FROM current_session")
    assert user == service.account.session().email


#: Values no column holds, each with the words of its reason.
UNHELD: list[tuple[str, Any, str]] = [
    ("exchange_rate", Decimal("1.123456789"), "more than 8 decimal places"),
    ("total_price_incl_tax", Decimal("12.34567"), "more than 4 decimal places"),
    ("total_price_incl_tax", Decimal("1E+14"), "exceeds DECIMAL(18,4)"),
    ("total_price_incl_tax", Decimal("1E+60"), "exceeds DECIMAL(18,4)"),  # 61 digits
    (
        "created_at",
        dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.timezone(dt.timedelta(hours=-12))),
        "out of range in UTC",
    ),
]


def test_invoices_the_destination_cannot_hold_are_quarantined_and_the_rest_load(
    pipeline: dlt.Pipeline,
) -> None:
    """Never rounded, never a failed load: each such invoice (one per kind of value, in
    the same load) is quarantined with its reason (the `quarantine` table), every other
    one loads, in this run and the later ones, which bring other invoices' changes."""
    with FakeInvoicingService(invoices=20, tls=False, limit=10**6).serve_in_thread() as service:
        service.account.record_bodies = False
        bad = sorted(service.account.invoices)[-len(UNHELD) :]  # `change` leaves them alone
        for ident, (field, value, _) in zip(bad, UNHELD, strict=True):
            setattr(service.account.invoices[ident], field, value)
        good = {i: r for i, r in on_service(service).items() if i not in bad}
        load(pipeline, service)
        assert current(pipeline) == good
        quarantined = dict(query(pipeline, "SELECT id, reason FROM quarantine"))
        assert sorted(quarantined) == bad
        for ident, (field, _, reason) in zip(bad, UNHELD, strict=True):
            assert field in quarantined[ident]
            assert reason in quarantined[ident]
        columns = query(
            pipeline,
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'quarantine'",
        )
        assert {c for (c,) in columns} == {"id", "revision", "reason", "_dlt_load_id", "_dlt_id"}

        changed, _ = change(service, 5, 0)
        again = load(pipeline, service)
        assert again["fetch"] == 1  # the five changed ones; the quarantined ones wait
        assert all(current(pipeline)[i] == service.account.invoices[i].revision for i in changed)
        assert current(pipeline) == {i: r for i, r in on_service(service).items() if i not in bad}
        load(pipeline, service)  # and the run after
        assert sorted(i for (i,) in query(pipeline, "SELECT id FROM quarantine")) == bad


def test_the_xml_format_loads_the_same_rows(
    service: FakeInvoicingService, pipeline: dlt.Pipeline
) -> None:
    sent = load(pipeline, service, format="xml")
    assert sent["fetch"] == math.ceil(INVOICES / 100)
    assert current(pipeline) == on_service(service)
    assert_totals_match(pipeline, service)


def test_unknown_fields_land_in_extra_in_every_table_of_the_load(
    service: FakeInvoicingService, pipeline: dlt.Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fields the models do not know are kept as JSON in `extra`, whichever of the load's
    tables (here 100 invoices each) they come in."""
    monkeypatch.setattr("invoicing_async.contrib.dlt._source._TABLE_SIZE", 100)
    ids = sorted(service.account.invoices)
    service.account.invoices[ids[150]].extra = {"new_field": "ünïcode"}
    load(pipeline, service)
    assert current(pipeline) == on_service(service)
    # In the real shape every invoice has fields beyond the specification; one more.
    extras = dict(query(pipeline, "SELECT id, extra FROM invoices"))
    assert extras.keys() == set(ids)
    for ident, invoice in service.account.invoices.items():
        assert json.loads(extras[ident]) == service.account.as_read(invoice, "json").extra
    assert json.loads(extras[ids[150]])["new_field"] == "ünïcode"


def test_a_full_load_of_several_tables_holds_each_row_once(
    service: FakeInvoicingService, pipeline: dlt.Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tables after the first (here 100 invoices each) are written anew with it, and
    a later load of several tables merges them all."""
    monkeypatch.setattr("invoicing_async.contrib.dlt._source._TABLE_SIZE", 100)

    def assert_each_row_once() -> None:
        invoices = service.account.invoices.values()
        assert query(pipeline, "SELECT COUNT(*) FROM invoices") == [(len(invoices),)]
        lines = sum(len(i.details) for i in invoices)
        assert query(pipeline, "SELECT COUNT(*) FROM invoices__details") == [(lines,)]
        assert current(pipeline) == on_service(service)

    load(pipeline, service)
    assert not merged(pipeline)
    assert_each_row_once()
    change(service, 150, 2)
    load(pipeline, service)
    assert merged(pipeline)
    assert_each_row_once()


def test_an_invoice_left_without_lines_loses_its_stored_lines(
    service: FakeInvoicingService, pipeline: dlt.Pipeline
) -> None:
    """A changed invoice's child rows are replaced, even by none (its marker rows)."""
    load(pipeline, service)
    emptied = max(service.account.invoices)
    service.clock.advance(60)
    service.account.invoices[emptied].details = []
    service.account.mutate(emptied)
    service.clock.advance(2)
    assert load(pipeline, service)["fetch"] == 1
    assert current(pipeline) == on_service(service)
    stored = query(
        pipeline, f"SELECT COUNT(*) FROM invoices__details WHERE _dlt_root_id = '{emptied}'"
    )
    assert stored == [(0,)]
    [(lines,)] = query(pipeline, "SELECT COUNT(*) FROM invoices__details")
    assert lines == sum(len(i.details) for i in service.account.invoices.values())


class Warnings(logging.Handler):
    """dlt's warnings while it is attached to dlt's logger."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.messages.append(record.getMessage())


@pytest.fixture
def dlt_warnings() -> Iterator[list[str]]:
    handler = Warnings()
    logging.getLogger("dlt").addHandler(handler)
    try:
        yield handler.messages
    finally:
        logging.getLogger("dlt").removeHandler(handler)


def test_templates_and_session_load_as_documented_and_are_replaced(
    service: FakeInvoicingService, pipeline: dlt.Pipeline, dlt_warnings: list[str]
) -> None:
    """`recurring_templates` with its lines, keyed like the invoices' child tables, and
    `current_session`: typed as the models, replaced on each load (a template deleted,
    its lines gone; lines removed, their rows gone). The session's `extra` (JSON text)
    is hinted as what it is: dlt warned "several column hints were different" for
    `current_session` on every run."""
    account = service.account
    for price in ("12.50", "7.25"):
        line = RecurringTemplateDetail(description="Hosting", price=Decimal(price), tax_rate_id=1)
        template = RecurringTemplate(
            contact_id=1, frequency=1, frequency_type=3, currency="EUR", details=[line, line]
        )
        account.create_template(template)
    load(pipeline, service)
    first, second = sorted(account.templates)
    lines = query(
        pipeline,
        "SELECT t.id, d.price, d._dlt_list_idx FROM recurring_templates AS t "
        "JOIN recurring_templates__details AS d ON d._dlt_root_id = t._dlt_id "
        "ORDER BY t.id, d._dlt_list_idx",
    )
    assert lines == [
        (first, Decimal("12.50"), 0),
        (first, Decimal("12.50"), 1),
        (second, Decimal("7.25"), 0),
        (second, Decimal("7.25"), 1),
    ]
    keys = {"_dlt_id"}
    assert (
        columns_of(pipeline, "recurring_templates")
        == set(export.scalar_columns(RecurringTemplate)) | {"extra"} | keys
    )
    assert (
        columns_of(pipeline, "recurring_templates__details")
        == (set(export.scalar_columns(RecurringTemplateDetail)) - {"destroy"})
        | {"extra"}
        | CHILD_KEYS
    )
    assert (
        columns_of(pipeline, "current_session")
        == set(export.scalar_columns(CurrentSession)) | {"extra"} | keys
    )
    [(email, extra)] = query(pipeline, "SELECT email, extra FROM current_session")
    assert email == account.session().email
    assert json.loads(extra) == (account.session().extra or None)

    account.delete_template(first)
    account.templates[second].details = []
    load(pipeline, service)
    assert query(pipeline, "SELECT id FROM recurring_templates") == [(second,)]
    assert query(pipeline, "SELECT COUNT(*) FROM recurring_templates__details") == [(0,)]
    assert query(pipeline, "SELECT COUNT(*) FROM current_session") == [(1,)]
    assert [w for w in dlt_warnings if "current_session" in w] == []
