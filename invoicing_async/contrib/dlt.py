"""A dlt source for the Invoicing Service: an account's invoices into any dlt destination.

``pipeline.run(invoicing_source(base_url=…))`` loads three resources:

- `invoices`, merged on `id`, with its child tables `invoices__details`,
  `invoices__payments` and `invoices__history`, yielded as Arrow tables (exact
  decimal128 money and rates, date32 dates, timestamps in UTC; Parquet load files) of up
  to 10,000 invoices each. Incremental by revision with the sync engine's own plan
  (`plan_sync`): one sync list, the `{id: revision}` read back from the destination's
  `invoices` table (never kept in dlt's state, which would grow to millions of entries),
  then only new and changed invoices fetched, 100 a request: 1 + ceil(changed / 100)
  requests. Invoices deleted on the service are deleted (default strategy
  `delete-insert`) or, with `scd2=True`, their current row is closed (`_dlt_valid_to`):
  every revision is kept with its validity, a change history for free.
- `recurring_templates` and `current_session`, replaced on each load (one request each).

The invoices come from the sync engine's own fetch phase (`SyncEngine.fetch_phase`):
the same plan, retries of missing ids, batch-failure limit, read-too-early rule and
quarantine. An invoice that cannot be read, or that holds a value its column cannot
(more decimal places than the column, past its precision, a timestamp out of range in
UTC, text that is not UTF-8), is quarantined with its reason: logged, listed in the
`quarantine` table, tried again when its revision changes or `quarantine_for` passes;
every other invoice loads. The pending plan (quarantined ids, rechecks) lives in the
resource's dlt state, a handful of entries, committed with the load.

A destination that lost the table (first load, dropped dataset, a refresh that resets
the resource's state) gives an empty `{id: revision}`: the load is then a full one.
When the budget runs out, the load stops cleanly after the last fetched batch (or
waits, with `wait_for_budget=True`): the next run starts from what reached the
destination.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import itertools
import json
import logging
import operator
import ssl as _ssl
import time
from collections.abc import AsyncIterator, Container, Iterator
from decimal import Decimal
from typing import Any

import attrs
import dlt
import pyarrow as pa
import pyarrow.compute as pc
from dlt.common.data_types.typing import TDataType
from dlt.common.destination.exceptions import DestinationUndefinedEntity
from dlt.common.schema.typing import TColumnSchema, TFileFormat, TTableSchemaColumns
from dlt.common.typing import TTableNames
from dlt.extract.hints import TResourceNestedHints
from dlt.extract.resource import DltResource

from invoicing_async import Auth, BasicAuth, Format, InvoicingClient, RateBudget
from invoicing_async._models import export
from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._sync import fetching
from invoicing_async._sync.report import SyncReport
from invoicing_async._sync.store import PendingEntry
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

__all__ = ["invoicing_source"]

logger = logging.getLogger("invoicing_async.contrib.dlt")

# dlt writes no rows of a resource into its nested tables, so `invoices__details` and
# the other child tables are tables of the `invoices` resource in their own right, merged
# on the key their rows share with their invoice row (`_dlt_root_id` = `invoices._dlt_id`).
# An invoice in the load (fetched or deleted) also sends a marker row to each table, a
# `_dlt_id` starting with "-": the merge deletes (scd2: closes) the stored rows of every
# invoice it receives, then inserts the real rows only, so no marker column is stored.
_REAL_ROWS = "_dlt_id NOT LIKE '-%'"
_MERGE = {"disposition": "merge", "strategy": "delete-insert", "source_filter": _REAL_ROWS}
_MERGE_ROOT = {**_MERGE, "destination_scope": "id IN (SELECT id FROM {staging_table})"}
_MERGE_CHILD = {
    **_MERGE,
    "destination_scope": "_dlt_root_id IN (SELECT _dlt_root_id FROM {staging_table})",
}
# scd2 keeps every version's rows: a child row of a version is written once.
_MERGE_SCD2 = {**_MERGE_ROOT, "strategy": "scd2"}
_MERGE_SCD2_CHILD = {
    **_MERGE,
    "destination_scope": "_dlt_id IN (SELECT _dlt_id FROM {staging_table})",
}
_CHILDREN: dict[str, type[Model]] = {
    "details": InvoiceDetail,
    "payments": InvoicePayment,
    "history": InvoiceHistoryRecord,
}
# dlt's cost is per yielded table: the fetched batches are gathered into tables of up to
# this many invoices (all in the same load package, so no less crash-safe).
_TABLE_SIZE = 10_000
_ARROW = {
    "int": pa.int64(),
    "bool": pa.bool_(),
    "str": pa.string(),
    "date": pa.date32(),
    "datetime": pa.timestamp("us", tz="UTC"),
}
# What Python (and so dlt and every reader) can hold of a timestamp in UTC.
_IN_RANGE = [
    pa.scalar(bound.replace(tzinfo=dt.timezone.utc), _ARROW["datetime"])
    for bound in (dt.datetime.min, dt.datetime.max)
]
_CHILD_KEYS: TTableSchemaColumns = {
    "_dlt_id": {"name": "_dlt_id", "data_type": "text", "nullable": False},
    "_dlt_parent_id": {"data_type": "text"},
    "_dlt_root_id": {"name": "_dlt_root_id", "data_type": "text"},
    "_dlt_list_idx": {"data_type": "bigint"},
}

_DLT_TYPES: dict[str, TDataType] = {
    "int": "bigint",
    "bool": "bool",
    "str": "text",
    "date": "date",
    "datetime": "timestamp",
    "decimal": "decimal",
    "json": "json",
}
_REQUEST_ONLY = ("destroy",)  # `_destroy` on a line: a request flag, never data
# Parquet where the destination takes it (dlt falls back to another format where not):
# DuckDB loads 2,000 invoices' rows in 1.8 s from Parquet, 25 s from INSERT statements.
_FILE_FORMAT: TFileFormat = "parquet"
_QUARANTINE_COLUMNS: TTableSchemaColumns = {
    "id": {"name": "id", "data_type": "bigint", "nullable": False},
    "revision": {"name": "revision", "data_type": "bigint", "nullable": False},
    "reason": {"name": "reason", "data_type": "text", "nullable": False},
}
_PENDING = "pending"  # resource state: the plan's quarantined ids and rechecks
_LOADED = "loaded"  # resource state: set once a load ran; reset by every dlt refresh


def _kinds(cls: type[Model]) -> dict[str, str]:
    """Column name -> kind of a model's scalar attributes, and `extra` as json."""
    kinds = export.scalar_columns(cls)
    return {**{n: k for n, k in kinds.items() if n not in _REQUEST_ONLY}, "extra": "json"}


def _columns(cls: type[Model]) -> TTableSchemaColumns:
    """The dlt columns of a model's scalar attributes, typed, plus `extra` as json."""
    columns: TTableSchemaColumns = {}
    for name, kind in _kinds(cls).items():
        column: TColumnSchema = {"name": name, "data_type": _DLT_TYPES[kind], "nullable": True}
        if kind == "decimal":
            column["precision"], column["scale"] = export.decimal_type(name)
        elif kind == "datetime":
            column["timezone"] = True
        columns[name] = column
    return columns


def _held(name: str, value: Any, owner: str) -> None:
    """Refuse (`ValueError`) a value its column cannot hold as it is: a decimal with more
    places than the column (never rounded) or past its precision, a datetime out of range
    in UTC, text that is not UTF-8 (a lone surrogate)."""
    what = f"{owner}: {name}"
    if isinstance(value, Decimal):
        precision, scale = export.decimal_type(name)
        if value != round(value, scale):
            raise ValueError(f"{what}={value} has more than {scale} decimal places")
        if abs(value) >= Decimal(10) ** (precision - scale):
            raise ValueError(f"{what}={value} exceeds DECIMAL({precision},{scale})")
    elif isinstance(value, dt.datetime):
        try:
            value.astimezone(dt.timezone.utc)
        except OverflowError:
            raise ValueError(f"{what}={value} is out of range in UTC") from None
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{what} is not valid UTF-8 text") from None
    elif isinstance(value, dict):
        _held(name, json.dumps(value, default=str, ensure_ascii=False), owner)


_ROW_FIELDS: dict[type[Any], tuple[tuple[str, bool], ...]] = {}


def _row_fields(cls: type[Any]) -> tuple[tuple[str, bool], ...]:
    """(name, whether it is a list of models) of a model's attributes as rows carry
    them, request-only flags left out. Worked out once per class."""
    if cls in _ROW_FIELDS:
        return _ROW_FIELDS[cls]
    kinds = export.scalar_columns(cls)
    _ROW_FIELDS[cls] = tuple(
        (field.name, field.name not in kinds and field.name != "extra")
        for field in attrs.fields(cls)
        if field.name not in _REQUEST_ONLY
    )
    return _ROW_FIELDS[cls]


def _row(model: Model) -> dict[str, Any]:
    """A model as a dlt row: plain values, nested lists of rows, empty `extra` as None;
    `ValueError` when a value cannot be held by its column (`_held`)."""
    row: dict[str, Any] = {}
    for name, nested in _row_fields(type(model)):
        value = getattr(model, name)
        if nested:
            value = [_row(item) for item in value]
        elif name == "extra":
            value = value or None
        if value is not None and not nested:
            _held(name, value, f"{type(model).__name__} {getattr(model, 'id', None)}")
        row[name] = value
    return row


class _Refused(Exception):
    """Values their columns cannot hold: {invoice id: why}."""

    def __init__(self, reasons: dict[int, str]) -> None:
        super().__init__(reasons)
        self.reasons = reasons


def _array(name: str, kind: str, values: list[Any]) -> pa.Array | None:
    """One typed column (None: an `extra` empty throughout, left to dlt to fill); an
    Arrow error (or `ValueError`) when a value does not fit its column."""
    if kind == "decimal":  # exact: Arrow refuses extra places and too many digits
        try:
            text = pa.array(values, pa.string())  # the service's text
        except pa.ArrowTypeError:  # integers, or a model's decimals
            text = pa.array([None if v is None else str(v) for v in values], pa.string())
        return pc.cast(text, pa.decimal128(*export.decimal_type(name)))
    if kind == "json":
        if not any(values):
            return None
        values = [json.dumps(v, default=str, ensure_ascii=False) if v else None for v in values]
        kind = "str"
    array = pa.array(values, _ARROW[kind])
    if kind == "datetime" and array.null_count < len(array):
        low, high = _IN_RANGE
        if pc.any(pc.or_(pc.less(array, low), pc.greater(array, high))).as_py():
            raise ValueError(f"{name} out of range")
    return array


def _arrays(cls: type[Model], items: list[Any]) -> dict[str, pa.Array]:
    """The typed columns of `items` (models, or the closed strict structs, of `cls`), one
    pass over the items per column; `_Refused` names by position the items holding a
    value a column cannot hold."""
    arrays: dict[str, pa.Array] = {}
    refused: dict[int, str] = {}
    for name, kind in _kinds(cls).items():
        if name == "extra":  # a strict struct has none
            values = [getattr(item, name) if type(item) is cls else None for item in items]
        else:
            values = list(map(operator.attrgetter(name), items))
        try:
            if (array := _array(name, kind, values)) is not None:
                arrays[name] = array
        except (pa.ArrowException, ValueError, UnicodeError):
            blamed: dict[int, str] = {}
            for position, (item, value) in enumerate(zip(items, values, strict=True)):
                try:
                    if value is not None:
                        value = Decimal(value) if kind == "decimal" else value
                        _held(name, value, f"{cls.__name__} {getattr(item, 'id', None)}")
                except ValueError as exc:
                    blamed[position] = str(exc)
            if not blamed:  # no value to blame: never a column left out
                raise
            refused = {**blamed, **refused}
    if refused:
        raise _Refused(refused)
    return arrays


def _tables(
    documents: list[InvoiceDocument], *, scd2: bool, stored: Container[int] = ()
) -> tuple[dict[str, pa.Table], dict[int, str]]:
    """The `invoices` table and its child tables of fetched invoices, and {id: why} of the
    invoices left out, holding a value a column cannot hold. An invoice's `_dlt_id` is its
    id; with scd2 a hash of its document, the key of a version. The child rows of those
    `stored` are replaced (marker rows)."""

    def key(document: InvoiceDocument) -> str:
        return (
            hashlib.blake2b(document.document, digest_size=16).hexdigest()
            if scd2
            else str(document.id)
        )

    invoices = [(d.id or 0, key(d), d.values()) for d in documents]
    refused: dict[int, str] = {}
    while True:  # each round leaves out at least one invoice
        try:
            return _build(invoices, [] if scd2 else stored), refused
        except _Refused as exc:
            refused.update(exc.reasons)
            invoices = [i for i in invoices if i[0] not in exc.reasons]


def _table(arrays: dict[str, pa.Array]) -> pa.Table:
    """A table whose `_dlt_id` is NOT NULL, as its column in dlt's schema."""
    fields = [pa.field(n, a.type, nullable=n != "_dlt_id") for n, a in arrays.items()]
    return pa.Table.from_arrays(list(arrays.values()), schema=pa.schema(fields))


def _markers(ids: list[int], keys: list[str], *, root: bool) -> pa.Table:
    """Marker rows naming invoices in the load (see `_REAL_ROWS`)."""
    marked = pa.array([f"-{i}" for i in ids], pa.string())
    if root:
        return _table({"id": pa.array(ids, pa.int64()), "_dlt_id": marked})
    return _table({"_dlt_id": marked, "_dlt_root_id": pa.array(keys, pa.string())})


def _build(invoices: list[tuple[int, str, Any]], replaced: Container[int]) -> dict[str, pa.Table]:
    """The tables of `invoices` ((id, key, values) each); `_Refused` names by id every
    invoice holding a value a column of any of them cannot hold."""
    ids = [i for i, _, _ in invoices]
    keys = pa.array([k for _, k, _ in invoices], pa.string())
    values = [v for _, _, v in invoices]
    refused: dict[int, str] = {}
    tables: dict[str, pa.Table] = {}
    try:
        tables["invoices"] = _table({**_arrays(Invoice, values), "_dlt_id": keys})
    except _Refused as exc:
        refused = {ids[n]: why for n, why in exc.reasons.items()}
    marked = [(i, k) for i, k, _ in invoices if i in replaced]
    for name, cls in _CHILDREN.items():
        lists = [getattr(v, name) or () for v in values]
        owners = [n for n, items in enumerate(lists) for _ in items]
        try:
            arrays = _arrays(cls, list(itertools.chain.from_iterable(lists)))
        except _Refused as exc:
            for n, why in exc.reasons.items():
                refused.setdefault(ids[owners[n]], why)
            continue
        parents = keys.take(pa.array(owners, pa.int64()))
        positions = pa.array([n for items in lists for n in range(len(items))], pa.int64())
        arrays["_dlt_id"] = pc.binary_join_element_wise(
            parents, pc.cast(positions, pa.string()), "."
        )
        arrays |= {"_dlt_parent_id": parents, "_dlt_root_id": parents, "_dlt_list_idx": positions}
        table = _table(arrays)
        if marked:  # the stored rows of an invoice are replaced, even by none
            markers = _markers([i for i, _ in marked], [k for _, k in marked], root=False)
            table = pa.concat_tables([table, markers], promote_options="default")
        tables[f"invoices__{name}"] = table
    if refused:
        raise _Refused(refused)
    return tables


@attrs.frozen
class _Account:
    """How the resources reach the service: address, credentials, format and budget."""

    base_url: str
    auth: Auth
    format: Format
    ssl: _ssl.SSLContext | None
    budget: RateBudget | None  # None: one made from budget_url per client, then closed
    budget_url: str | None
    wait_for_budget: bool
    #: Set when the `invoices` resource has finished (the `quarantine` table waits).
    invoices_done: asyncio.Event = attrs.field(factory=asyncio.Event, eq=False)

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[InvoicingClient]:
        """A client for one resource, its requests background work of the budget."""
        budget = self.budget if self.budget is not None else RateBudget(shared=self.budget_url)
        try:
            async with InvoicingClient(
                self.base_url, auth=self.auth, format=self.format, budget=budget, ssl=self.ssl
            ) as client:
                if self.wait_for_budget:
                    yield client.with_options(background=True, max_wait=None)
                else:
                    yield client.with_options(background=True)
        finally:
            if self.budget is None:
                await budget.close()


_NESTED = ("invoices__details", "invoices__payments", "invoices__history")


def _stored_revisions(pipeline: dlt.Pipeline, *, scd2: bool) -> SyncRevisions | None:
    """`{id: revision}` of the invoices in the destination (current rows with scd2).

    Empty when the dataset does not exist (a first load, or a dropped dataset); None
    when the `invoices` table alone was dropped: its nested tables, orphans now, are
    dropped too, and the caller has dlt create the tables again.
    """
    revisions = SyncRevisions()
    if getattr(pipeline, "destination", None) is None:  # extract only: nothing stored
        return revisions
    naming = pipeline.default_schema.naming if pipeline.default_schema_name else None

    def named(name: str) -> str:
        return naming.normalize_identifier(name) if naming else name

    with pipeline.sql_client() as sql:
        if not sql.has_dataset():
            return revisions
        ident, revision, valid_to = (
            sql.escape_column_name(named(c)) for c in ("id", "revision", "_dlt_valid_to")
        )
        table = sql.make_qualified_table_name(named("invoices"))
        current = f" WHERE {valid_to} IS NULL" if scd2 else ""
        query = f"SELECT {ident}, {revision} FROM {table}{current} ORDER BY {ident}"
        try:
            with sql.execute_query(query) as cursor:
                while rows := cursor.fetchmany(50_000):
                    for found, at in rows:
                        revisions.add(int(found), int(at or 0))
        except DestinationUndefinedEntity:
            sql.drop_tables(*_NESTED)
            return None
    return revisions


async def _invoices(
    account: _Account, *, scd2: bool, settings: fetching.SyncSettings
) -> AsyncIterator[Any]:
    """The `invoices` resource: deletion markers, then new and changed invoices in
    batches of 100 from the engine's fetch phase."""
    state = dlt.current.resource_state("invoices")
    # Every dlt refresh resets this state: the destination's table is about to be
    # dropped or emptied, so the load is a full one.
    loaded = bool(state.get(_LOADED))
    stored = _stored_revisions(dlt.current.pipeline(), scd2=scd2) if loaded else SyncRevisions()
    # The table was dropped behind dlt's back: a new hint makes a new schema version,
    # which has dlt create the missing tables again.
    rebuild: dict[str, Any] | None = None
    if stored is None:
        rebuild = {"x-invoicing-rebuilt": int(time.time())}
    pending = {int(i): PendingEntry(*e) for i, e in state.get(_PENDING, {}).items()}
    reasons: dict[str, str] = state.get("reasons", {})
    async with account.client() as client:
        plan = await settings.plan(client, stored or SyncRevisions(), pending)
        if plan.deletions_refused:
            logger.warning("deletions not applied: %s", plan.deletions_refused)
        if plan.to_delete:
            deleted = list(plan.to_delete)
            yield _markers(deleted, [], root=True)
            for name in [] if scd2 else _CHILDREN:
                marked = _markers(deleted, [str(i) for i in deleted], root=False)
                yield dlt.mark.with_table_name(marked, f"invoices__{name}")
        report = SyncReport()
        phase = fetching.FetchPhase(client, plan, report, settings)
        fetched: list[InvoiceDocument] = []
        async with contextlib.aclosing(phase.batches()) as batches:
            async for batch in batches:
                fetched += batch.documents
                if len(fetched) < _TABLE_SIZE:
                    continue
                for item in _yielded(fetched, phase, rebuild, scd2=scd2, stored=stored or ()):
                    yield item
                fetched, rebuild = [], None
        for item in _yielded(fetched, phase, rebuild, scd2=scd2, stored=stored or ()):
            yield item
    queued = phase.queued_ids()
    if queued:
        logger.warning("%d invoices not fetched: the next run fetches them", len(queued))
    kept = {i: e for i, e in phase.remaining_plan().items() if i not in queued or e.attempts}
    reasons = {
        str(i): report.unreadable.get(i, reasons.get(str(i), ""))
        for i, e in kept.items()
        if e.quarantined
    }
    state[_PENDING] = {str(i): attrs.astuple(e) for i, e in kept.items()}
    state["reasons"] = reasons
    state[_LOADED] = True
    account.invoices_done.set()


def _yielded(
    documents: list[InvoiceDocument],
    phase: fetching.FetchPhase,
    rebuild: dict[str, Any] | None,
    *,
    scd2: bool,
    stored: Container[int],
) -> Iterator[Any]:
    """The tables of `documents`, each marked with its table name; the invoices they
    cannot hold quarantined."""
    tables, refused = _tables(documents, scd2=scd2, stored=stored)
    phase.quarantine(refused)
    for name, table in tables.items():
        if name == "invoices" and rebuild:
            hints = dlt.mark.make_hints(additional_table_hints=rebuild)
            yield dlt.mark.with_hints(table, hints)
        elif table.num_rows:
            yield dlt.mark.with_table_name(table, name)


async def _quarantine(account: _Account) -> AsyncIterator[list[dict[str, Any]]]:
    """The `quarantine` table: the invoices quarantined by the `invoices` run (by the
    last one when that resource is not loaded now), with why."""
    if "invoices" in dlt.current.source().selected_resources:
        await account.invoices_done.wait()
    state = dlt.current.resource_state("invoices")
    pending = state.get(_PENDING, {})
    yield [
        {"id": int(i), "revision": pending[i][1], "reason": why}
        for i, why in state.get("reasons", {}).items()
        if i in pending
    ]


async def _recurring_templates(account: _Account) -> AsyncIterator[list[dict[str, Any]]]:
    async with account.client() as client:
        yield [_row(template) for template in await client.recurring_templates.list()]


async def _current_session(account: _Account) -> AsyncIterator[dict[str, Any]]:
    async with account.client() as client:
        yield _row(await client.current_session())


def _nested(**models: type[Model]) -> dict[TTableNames, TResourceNestedHints]:
    """Typed columns for the nested tables (a model's lists: `details`, `payments`…)."""
    return {name: {"columns": _columns(cls)} for name, cls in models.items()}


@dlt.source(name="invoicing", root_key=True)
def invoicing_source(
    base_url: str = dlt.config.value,
    username: str | None = dlt.secrets.value,
    password: str | None = dlt.secrets.value,
    auth: Auth | None = None,
    ssl: _ssl.SSLContext | None = None,
    ca_file: str | None = dlt.config.value,
    format: Format = "json",
    budget: RateBudget | None = None,
    budget_url: str | None = None,
    scd2: bool = False,
    wait_for_budget: bool = False,
    concurrency: int = 4,
    max_delete_share: float = 0.5,
    force_deletions: bool = False,
    quarantine_for: float = 6 * 3600.0,
) -> Iterator[DltResource]:
    """The account's `invoices`, `recurring_templates` and `current_session`.

    Credentials come from dlt's secrets (`sources.invoicing.username`/`password`, e.g.
    `SOURCES__INVOICING__PASSWORD`), or `auth=` takes any auth the client takes
    (`BasicAuth`, `OAuth1Auth`); the address from its config. `ssl=` is the client's
    `ssl.SSLContext`, or `ca_file` (from dlt's config too) a CA bundle to trust. `budget` is the
    account's `RateBudget` (give every client of the account the same one); `budget_url`
    shares it with other processes instead (as `RateBudget(shared=…)`). `scd2` keeps
    every revision of every invoice with validity dates. `concurrency` sync-fetch
    requests are in flight at once; `max_delete_share` and `force_deletions` guard
    deletions, and `quarantine_for` the retry of a quarantined invoice, as in `SyncEngine`.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if auth is None:
        if username is None or password is None:
            raise ValueError("give auth=, or username and password (dlt secrets)")
        auth = BasicAuth(username, password)
    if ssl is None and ca_file:
        ssl = _ssl.create_default_context(cafile=ca_file)
    account = _Account(
        base_url=base_url,
        auth=auth,
        ssl=ssl,
        format=format,
        budget=budget if budget is not None or budget_url else RateBudget(),
        budget_url=budget_url,
        wait_for_budget=wait_for_budget,
    )
    invoices = dlt.resource(_invoices, name="invoices")(
        account,
        scd2=scd2,
        settings=fetching.SyncSettings(
            concurrency=concurrency,
            max_delete_share=max_delete_share,
            force_deletions=force_deletions,
            quarantine_for=quarantine_for,
        ),
    )
    for name, cls in _CHILDREN.items():  # before the root's hints, which variants copy
        invoices.apply_hints(
            table_name=f"invoices__{name}",
            write_disposition=_MERGE_SCD2_CHILD if scd2 else _MERGE_CHILD,  # type: ignore[arg-type]
            columns={**_columns(cls), **_CHILD_KEYS},
            create_table_variant=True,
        )
    invoices.apply_hints(
        write_disposition=_MERGE_SCD2 if scd2 else _MERGE_ROOT,  # type: ignore[arg-type]
        # scd2 keys a version by its `_dlt_id`, the other strategy an invoice by its id
        primary_key=() if scd2 else "id",
        columns={**_columns(Invoice), "_dlt_id": _CHILD_KEYS["_dlt_id"]},
    )
    yield invoices
    yield dlt.resource(
        _quarantine,
        name="quarantine",
        write_disposition="replace",
        columns=_QUARANTINE_COLUMNS,
    )(account)
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
