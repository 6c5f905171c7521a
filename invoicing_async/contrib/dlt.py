"""A dlt source for the Invoicing Service: an account's invoices into any dlt destination.

``pipeline.run(invoicing_source(base_url=…))`` loads three resources:

- `invoices`, merged on `id`, with the nested tables `invoices__details`,
  `invoices__payments` and `invoices__history`. Incremental by revision with the sync
  engine's own plan (`plan_sync`): one sync list, the `{id: revision}` read back from
  the destination's `invoices` table (never kept in dlt's state, which would grow to
  millions of entries), then only new and changed invoices fetched, 100 a request:
  1 + ceil(changed / 100) requests. Invoices deleted on the service are hard-deleted
  (default strategy `delete-insert`, the latest row per invoice) or, with `scd2=True`,
  their current row is closed (`_dlt_valid_to`): every revision is kept with its
  validity, a change history for free.
- `recurring_templates` and `current_session`, replaced on each load (one request each).

The plan is `plan_sync` as the engine runs it, given the destination's revisions; its
pending entries are only the invoices read within their revision's second (kept in the
resource's dlt state, a handful), so the engine's quarantine of unreadable invoices is
not used: such an invoice is logged and tried again on the next run.

Requests go through this package's client and its `RateBudget` (pass a shared one with
`budget=`, or `budget_url=`); dlt's own HTTP client and retries are not used. Money is
typed `decimal` with precision 18 and scale 4 (amounts come with at most two places;
four hold sub-cent unit prices, and sums stay exact), rates (`exchange_rate`,
`discount`) scale 8; a value with more places is refused, never rounded. Dates are
`date`, datetimes `timestamp` with zone. Unknown fields the service sent are kept in a
`json` column `extra`.

A destination that lost the table (first load, dropped dataset) gives an empty
`{id: revision}`: the load is then a full one. When the budget runs out, the load stops
cleanly after the last fetched batch (or waits, with `wait_for_budget=True`): the next
run starts from what reached the destination.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Any

import attrs
import dlt
from dlt.common.data_types.typing import TDataType
from dlt.common.destination.exceptions import DestinationUndefinedEntity
from dlt.common.schema.typing import TColumnSchema, TFileFormat, TTableSchemaColumns
from dlt.common.typing import TTableNames
from dlt.extract.hints import TResourceNestedHints
from dlt.extract.resource import DltResource

from invoicing_async import BasicAuth, Format, InvoicingClient, RateBudget
from invoicing_async._models.export import decimal_type, scalar_columns
from invoicing_async._resources.invoices import FetchedBatch
from invoicing_async._sync.fetching import newest_of_requested
from invoicing_async.errors import RateLimitExceeded
from invoicing_async.models import (
    CurrentSession,
    Invoice,
    InvoiceDetail,
    InvoiceHistoryRecord,
    InvoicePayment,
    Model,
    RecurringTemplate,
    RecurringTemplateDetail,
    SyncRevisions,
)
from invoicing_async.sync import BATCH_SIZE, PendingEntry, plan_sync

__all__ = ["DELETED_COLUMN", "invoicing_source"]

logger = logging.getLogger("invoicing_async.contrib.dlt")

DELETED_COLUMN = "_deleted"
"""True on the marker row of an invoice deleted on the service (never stored)."""

_DLT_TYPES: dict[str, TDataType] = {
    "int": "bigint",
    "bool": "bool",
    "str": "text",
    "date": "date",
    "datetime": "timestamp",
    "decimal": "decimal",
}
_REQUEST_ONLY = ("destroy",)  # `_destroy` on a line: a request flag, never data
# Parquet where the destination takes it (dlt falls back to another format where not):
# DuckDB loads 2,000 invoices' rows in 1.8 s from Parquet, 25 s from INSERT statements.
_FILE_FORMAT: TFileFormat = "parquet"
_RECHECK = "recheck"  # resource state: {id: revision} of invoices read within that second


def _columns(cls: type[Model]) -> TTableSchemaColumns:
    """The dlt columns of a model's scalar attributes, typed, plus `extra` as json."""
    columns: TTableSchemaColumns = {}
    for name, kind in scalar_columns(cls).items():
        if name in _REQUEST_ONLY:
            continue
        column: TColumnSchema = {"name": name, "data_type": _DLT_TYPES[kind], "nullable": True}
        if kind == "decimal":
            column["precision"], column["scale"] = decimal_type(name)
        elif kind == "datetime":
            column["timezone"] = True
        columns[name] = column
    columns["extra"] = {"name": "extra", "data_type": "json", "nullable": True}
    return columns


def _exact(name: str, value: Decimal, owner: Model) -> None:
    """Refuse a decimal with more places than its column: the destination would round it."""
    scale = decimal_type(name)[1]
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and -exponent > scale and value != round(value, scale):
        raise ValueError(
            f"{type(owner).__name__} {getattr(owner, 'id', None)}: {name}={value} has more "
            f"than {scale} decimal places; the column would round it"
        )


_ROW_FIELDS: dict[type[Any], tuple[tuple[str, str], ...]] = {}


def _row_fields(cls: type[Any]) -> tuple[tuple[str, str], ...]:
    """(name, kind) of a model's attributes as rows carry them: "decimal", "list",
    "extra" or "value"; request-only flags left out. Worked out once per class."""
    known = _ROW_FIELDS.get(cls)
    if known is not None:
        return known
    kinds = scalar_columns(cls)
    fields = []
    for field in attrs.fields(cls):
        if field.name in _REQUEST_ONLY:
            continue
        if field.name == "extra":
            kind = "extra"
        elif kinds.get(field.name) == "decimal":
            kind = "decimal"
        elif field.name in kinds:
            kind = "value"
        else:
            kind = "list"
        fields.append((field.name, kind))
    _ROW_FIELDS[cls] = tuple(fields)
    return _ROW_FIELDS[cls]


def _row(model: Model) -> dict[str, Any]:
    """A model as a dlt row: plain values, nested lists of rows, empty `extra` as None."""
    row: dict[str, Any] = {}
    for name, kind in _row_fields(type(model)):
        value = getattr(model, name)
        if kind == "decimal" and value is not None:
            _exact(name, value, model)
        elif kind == "list":
            value = [_row(item) for item in value]
        elif kind == "extra":
            value = value or None
        row[name] = value
    return row


@attrs.frozen
class _Account:
    """How the resources reach the service: address, credentials, format and budget."""

    base_url: str
    auth: BasicAuth
    format: Format
    budget: RateBudget | None  # None: one made from budget_url per client, then closed
    budget_url: str | None
    wait_for_budget: bool

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[InvoicingClient]:
        """A client for one resource, its requests background work of the budget."""
        budget = self.budget if self.budget is not None else RateBudget(shared=self.budget_url)
        try:
            async with InvoicingClient(
                self.base_url, auth=self.auth, format=self.format, budget=budget
            ) as client:
                if self.wait_for_budget:
                    yield client.with_options(background=True, max_wait=None)
                else:
                    yield client.with_options(background=True)
        finally:
            if self.budget is None:
                await budget.close()


def _stored_revisions(pipeline: dlt.Pipeline, *, scd2: bool) -> SyncRevisions:
    """`{id: revision}` of the invoices in the destination (current rows with scd2).

    Empty when the table or the dataset does not exist (a first load, or a destination
    that was reset): everything listed is then fetched.
    """
    revisions = SyncRevisions()
    if getattr(pipeline, "destination", None) is None:  # extract only: nothing stored
        return revisions
    naming = pipeline.default_schema.naming if pipeline.default_schema_name else None

    def named(name: str) -> str:
        return naming.normalize_identifier(name) if naming else name

    try:
        with pipeline.sql_client() as sql:
            ident, revision, valid_to = (
                sql.escape_column_name(named(c)) for c in ("id", "revision", "_dlt_valid_to")
            )
            table = sql.make_qualified_table_name(named("invoices"))
            current = f" WHERE {valid_to} IS NULL" if scd2 else ""
            query = f"SELECT {ident}, {revision} FROM {table}{current} ORDER BY {ident}"
            with sql.execute_query(query) as cursor:
                while rows := cursor.fetchmany(50_000):
                    for found, at in rows:
                        revisions.add(int(found), int(at or 0))
    except DestinationUndefinedEntity:  # no such table, or no such dataset
        return SyncRevisions()
    return revisions


def _read_too_early(revision: int | None, server_time: float | None) -> bool:
    """Read within its revision's own second: a change later in that second would keep
    the revision, so the invoice is read once more next time (as the sync engine does)."""
    read_at = server_time if server_time is not None else time.time() - 5.0
    return (revision or 0) >= int(read_at)


async def _fetched(
    client: InvoicingClient, ids: list[int], concurrency: int
) -> AsyncIterator[tuple[list[int], FetchedBatch]]:
    """Sync-fetch `ids` 100 a request, `concurrency` requests in flight, in order; stops
    (without raising) at the first batch the budget refuses."""
    batches = (ids[start : start + BATCH_SIZE] for start in range(0, len(ids), BATCH_SIZE))
    flight: collections.deque[tuple[list[int], asyncio.Future[FetchedBatch]]] = collections.deque()

    def send(batch: list[int]) -> None:
        flight.append((batch, asyncio.ensure_future(client.invoices.fetch_batch(batch))))

    try:
        for batch in itertools.islice(batches, concurrency):
            send(batch)
        while flight:
            asked, task = flight.popleft()
            try:
                fetched = await task
            except RateLimitExceeded as exc:
                logger.warning("budget spent (%s): the next run fetches the rest", exc)
                return
            following = next(batches, None)
            if following is not None:
                send(following)
            yield asked, fetched
    finally:
        for _, task in flight:
            task.cancel()
        await asyncio.gather(*(task for _, task in flight), return_exceptions=True)


async def _invoices(
    account: _Account,
    *,
    scd2: bool,
    concurrency: int,
    max_delete_share: float,
    force_deletions: bool,
) -> AsyncIterator[list[dict[str, Any]]]:
    """The `invoices` resource: deletion markers, then new and changed invoices in
    batches of 100, each batch a list of rows."""
    stored = _stored_revisions(dlt.current.pipeline(), scd2=scd2)
    state = dlt.current.resource_state("invoices")
    recheck = {int(i): int(r) for i, r in state.get(_RECHECK, {}).items()}
    pending = {i: PendingEntry(id=i, revision=r) for i, r in recheck.items() if stored.get(i) == r}
    async with account.client() as client:
        listed = await client.invoices.sync_revisions()
        plan = plan_sync(
            listed,
            stored,
            pending,
            max_delete_share=max_delete_share,
            force_deletions=force_deletions,
        )
        if plan.deletions_refused:
            logger.warning("deletions not applied: %s", plan.deletions_refused)
        for start in range(0, len(plan.to_delete), BATCH_SIZE * 10):
            yield [
                {"id": i, DELETED_COLUMN: True}
                for i in plan.to_delete[start : start + BATCH_SIZE * 10]
            ]
        left = dict.fromkeys(plan.to_fetch)
        again: dict[int, int] = {}
        async for ids, batch in _fetched(client, plan.to_fetch, concurrency):
            for failed in batch.unreadable:
                logger.warning(
                    "invoice %s cannot be read, left for the next run: %s",
                    failed.ident,
                    failed.error,
                )
            rows = []
            for document in newest_of_requested(ids, batch.documents):
                rows.append(_row(document.model()))
                left.pop(document.id or 0, None)
                if _read_too_early(document.revision, batch.server_time):
                    again[document.id or 0] = document.revision or 0
            yield rows
        if left:
            logger.warning("%d invoices not fetched: the next run fetches them", len(left))
    again.update((i, r) for i, r in recheck.items() if i in left)
    state[_RECHECK] = {str(i): r for i, r in again.items()}


async def _recurring_templates(account: _Account) -> AsyncIterator[list[dict[str, Any]]]:
    async with account.client() as client:
        yield [_row(template) for template in await client.recurring_templates.list()]


async def _current_session(account: _Account) -> AsyncIterator[dict[str, Any]]:
    async with account.client() as client:
        yield _row(await client.current_session())


def _nested(**models: type[Model]) -> dict[TTableNames, TResourceNestedHints]:
    """Typed columns for the nested tables (a model's lists: `details`, `payments`…)."""
    return {name: {"columns": _columns(cls)} for name, cls in models.items()}


@dlt.source(name="invoicing")
def invoicing_source(
    base_url: str = dlt.config.value,
    username: str = dlt.secrets.value,
    password: str = dlt.secrets.value,
    format: Format = "json",
    budget: RateBudget | None = None,
    budget_url: str | None = None,
    scd2: bool = False,
    wait_for_budget: bool = False,
    concurrency: int = 4,
    max_delete_share: float = 0.5,
    force_deletions: bool = False,
) -> Iterator[DltResource]:
    """The account's `invoices`, `recurring_templates` and `current_session`.

    Credentials come from dlt's secrets (`sources.invoicing.username`/`password`, e.g.
    `SOURCES__INVOICING__PASSWORD`), the address from its config. `budget` is the
    account's `RateBudget` (give every client of the account the same one); `budget_url`
    shares it with other processes instead (as `RateBudget(shared=…)`). `scd2` keeps
    every revision of every invoice with validity dates. `concurrency` sync-fetch
    requests are in flight at once; `max_delete_share` and `force_deletions` guard
    deletions as in `SyncEngine`.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    account = _Account(
        base_url=base_url,
        auth=BasicAuth(username, password),
        format=format,
        budget=budget if budget is not None or budget_url else RateBudget(),
        budget_url=budget_url,
        wait_for_budget=wait_for_budget,
    )
    invoice_columns = _columns(Invoice)
    if scd2:
        # Deletion markers are kept out of the rows (`source_filter`) but name the
        # invoices whose current row is closed (`destination_scope`).
        disposition: Any = {
            "disposition": "merge",
            "strategy": "scd2",
            "source_filter": f"{DELETED_COLUMN} IS NULL",
            "destination_scope": "id IN (SELECT id FROM {staging_table})",
        }
        invoice_columns[DELETED_COLUMN] = {"data_type": "bool", "nullable": True}
        primary_key: Any = ()
    else:
        disposition = {"disposition": "merge", "strategy": "delete-insert"}
        invoice_columns[DELETED_COLUMN] = {
            "data_type": "bool",
            "nullable": True,
            "hard_delete": True,
        }
        primary_key = "id"
    yield dlt.resource(
        _invoices,
        name="invoices",
        file_format=_FILE_FORMAT,
        write_disposition=disposition,
        primary_key=primary_key,
        columns=invoice_columns,
        nested_hints=_nested(
            details=InvoiceDetail, payments=InvoicePayment, history=InvoiceHistoryRecord
        ),
    )(
        account,
        scd2=scd2,
        concurrency=concurrency,
        max_delete_share=max_delete_share,
        force_deletions=force_deletions,
    )
    yield dlt.resource(
        _recurring_templates,
        name="recurring_templates",
        file_format=_FILE_FORMAT,
        write_disposition="replace",
        primary_key="id",
        columns=_columns(RecurringTemplate),
        nested_hints=_nested(details=RecurringTemplateDetail),
    )(account)
    yield dlt.resource(
        _current_session,
        name="current_session",
        file_format=_FILE_FORMAT,
        write_disposition="replace",
        columns=_columns(CurrentSession),
    )(account)
