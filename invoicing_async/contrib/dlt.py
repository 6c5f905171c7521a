"""A dlt source for the Invoicing Service: an account's invoices into any dlt destination.

``pipeline.run(invoicing_source(base_url=…))`` loads `invoices` (merged on `id`, with its
child tables, incremental by revision against the `{id: revision}` read back from the
destination), `recurring_templates` and `current_session` as Arrow tables. The invoices
come from the sync engine's own fetch phase, with its retries and quarantine. The guide
(Pipelines and analytics) tells how loads, deletions, scd2 and the budget behave.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import itertools
import json
import operator
import ssl as _ssl
from collections.abc import AsyncIterator, Container, Iterator, Mapping
from decimal import Decimal
from typing import Any

import attrs
import dlt
import pyarrow as pa
import pyarrow.compute as pc
from dlt.common.data_types.typing import TDataType
from dlt.common.destination.exceptions import DestinationUndefinedEntity
from dlt.common.schema.typing import TColumnSchema, TTableSchemaColumns
from dlt.extract.resource import DltResource

from invoicing_async import Auth, BasicAuth, Format, InvoicingClient, RateBudget
from invoicing_async._models import export, fields
from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._sync import fetching
from invoicing_async._sync.report import SyncReport
from invoicing_async._sync.store import PendingEntry
from invoicing_async._text import package_logger as _package_logger
from invoicing_async._wire import scalars
from invoicing_async.errors import DecodeError
from invoicing_async.models import CurrentSession, Invoice, Model, RecurringTemplate, SyncRevisions

__all__ = ["invoicing_source"]

logger = _package_logger("invoicing_async.contrib.dlt")

# dlt writes no rows of a resource into its nested tables, so `invoices__details` and
# the other child tables are tables of the `invoices` resource in their own right, merged
# on the key their rows share with their invoice row (`_dlt_root_id` = `invoices._dlt_id`).
# An invoice in the load (fetched or deleted) also sends a marker row to each table, a
# `_dlt_id` starting with "-": the merge deletes (scd2: closes) the stored rows of every
# invoice it receives, then inserts the real rows only, so no marker column is stored.
_REAL_ROWS = "_dlt_id NOT LIKE '-%'"


def _merge(key: str, *, scd2: bool = False) -> Any:
    """dlt's merge of a table whose stored rows are deleted (scd2: closed) when their
    `key` is in the load (a child row of a scd2 version is written once)."""
    return {
        "disposition": "merge",
        "strategy": "scd2" if scd2 else "delete-insert",
        "source_filter": _REAL_ROWS,
        "destination_scope": f"{key} IN (SELECT {key} FROM {{staging_table}})",
    }


# dlt's cost is per yielded table: the fetched batches are gathered into tables of up to
# this many invoices (all in the same load package, so no less crash-safe).
_TABLE_SIZE = 10_000
# A column's kind (`export.scalar_columns`, `extra` as json): its dlt type and Arrow
# type (decimals: read as text, then typed by column, `export.decimal_type`).
_TYPES: dict[str, tuple[TDataType, pa.DataType]] = {
    "int": ("bigint", pa.int64()),
    "bool": ("bool", pa.bool_()),
    "str": ("text", pa.string()),
    "date": ("date", pa.date32()),
    "datetime": ("timestamp", pa.timestamp("us", tz="UTC")),
    "decimal": ("decimal", pa.string()),
    "json": ("json", pa.string()),
}
# What Python (and so dlt and every reader) can hold of a timestamp in UTC.
_IN_RANGE = [
    pa.scalar(bound.replace(tzinfo=dt.timezone.utc), _TYPES["datetime"][1])
    for bound in (dt.datetime.min, dt.datetime.max)
]
_CHILD_KEYS: TTableSchemaColumns = {
    "_dlt_id": {"name": "_dlt_id", "data_type": "text", "nullable": False},
    "_dlt_parent_id": {"data_type": "text"},
    "_dlt_root_id": {"name": "_dlt_root_id", "data_type": "text"},
    "_dlt_list_idx": {"data_type": "bigint"},
}
_REQUEST_ONLY = ("destroy",)  # `_destroy` on a line: a request flag, never data
_QUARANTINE_COLUMNS: TTableSchemaColumns = {
    "id": {"name": "id", "data_type": "bigint", "nullable": False},
    "revision": {"name": "revision", "data_type": "bigint", "nullable": False},
    "reason": {"name": "reason", "data_type": "text", "nullable": False},
}
_SESSION_EXTRA: TColumnSchema = {"name": "extra", "data_type": "text", "nullable": True}
_PENDING = "pending"  # resource state: the plan's quarantined ids and rechecks


def _kinds(cls: type[Model]) -> dict[str, str]:
    """Column name -> kind of a model's scalar attributes, and `extra` as json."""
    kinds = export.scalar_columns(cls)
    return {**{n: k for n, k in kinds.items() if n not in _REQUEST_ONLY}, "extra": "json"}


def _children(cls: type[Model]) -> dict[str, type[Model]]:
    """A model's lists of models (`details`…), each a child table."""
    return {s.name: s.item_model for s in fields.field_specs(cls) if s.item_model is not None}


def _columns(cls: type[Model]) -> TTableSchemaColumns:
    """The dlt columns of a model's scalar attributes, typed, plus `extra` as json."""
    columns: TTableSchemaColumns = {}
    for name, kind in _kinds(cls).items():
        column: TColumnSchema = {"name": name, "data_type": _TYPES[kind][0], "nullable": True}
        if kind == "decimal":
            column["precision"], column["scale"] = export.decimal_type(name)
        elif kind == "datetime":
            column["timezone"] = True
        columns[name] = column
    return columns


def _unheld(cls: type[Model], name: str, kind: str, item: Any, value: Any) -> str | None:
    """Why `item`'s value cannot be held by its column as it is (None: it can): a decimal
    with more places than the column (never rounded) or past its precision, a datetime
    out of range in UTC, text that is not UTF-8 (a lone surrogate)."""
    what = f"{cls.__name__} {getattr(item, 'id', None)}: {name}"
    if kind == "decimal" and value is not None:
        why = export.decimal_unheld(_decimal(value), name)
        return None if why is None else f"{what}={value} {why}"
    if isinstance(value, dt.datetime):
        try:
            value.astimezone(dt.timezone.utc)
        except OverflowError:
            return f"{what}={value} is out of range in UTC"
    elif isinstance(value, str | dict):
        try:
            json.dumps(value, default=str, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return f"{what} is not valid UTF-8 text"
    return None


def _decimal(value: Any) -> Decimal:
    """A decimal column's value (the service's text, an integer or a model's decimal) as a
    `Decimal`, read as the decoders read numbers; text that is none reads as NaN, which
    no column holds."""
    if isinstance(value, Decimal):
        return value
    try:
        return scalars.parse_decimal(str(value))
    except DecodeError:
        return Decimal("NaN")


class _Refused(ValueError):
    """Values their columns cannot hold: `args[0]`, {position or id of the item: why}."""


def _array(name: str, kind: str, values: list[Any]) -> pa.Array | None:
    """One typed column (None: an `extra` empty throughout, left to dlt to fill); an
    Arrow error (or `ValueError`) when a value does not fit its column."""
    if kind == "json":
        if not any(values):
            return None
        values = [json.dumps(v, default=str, ensure_ascii=False) if v else None for v in values]
    if kind == "decimal":  # exact: Arrow refuses extra places and too many digits
        try:
            text = pa.array(values, pa.string())  # the service's text
        except pa.ArrowTypeError:  # integers, or a model's decimals
            text = pa.array([None if v is None else str(v) for v in values], pa.string())
        try:
            return pc.cast(text, pa.decimal128(*export.decimal_type(name)))
        except pa.ArrowInvalid:  # judged by value, whatever the notation (`0E+100` fits)
            return export.held_decimals(name, [None if v is None else _decimal(v) for v in values])
    array = pa.array(values, _TYPES[kind][1])
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
            pairs = zip(items, values, strict=True)
            reasons = [_unheld(cls, name, kind, item, value) for item, value in pairs]
            blamed = {position: why for position, why in enumerate(reasons) if why}
            if not blamed:  # no value to blame: never a column left out
                raise
            refused = {**blamed, **refused}
    if refused:
        raise _Refused(refused)
    return arrays


def _table(arrays: dict[str, pa.Array]) -> pa.Table:
    """A table whose `_dlt_id` is NOT NULL, as its column in dlt's schema."""
    columns = [pa.field(n, a.type, nullable=n != "_dlt_id") for n, a in arrays.items()]
    return pa.Table.from_arrays(list(arrays.values()), schema=pa.schema(columns))


def _markers(ids: list[int], keys: list[str], *, root: bool) -> pa.Table:
    """Marker rows naming invoices in the load (see `_REAL_ROWS`)."""
    marked = pa.array([f"-{i}" for i in ids], pa.string())
    if root:
        return _table({"id": pa.array(ids, pa.int64()), "_dlt_id": marked})
    return _table({"_dlt_id": marked, "_dlt_root_id": pa.array(keys, pa.string())})


def _build(
    cls: type[Model], name: str, rows: list[tuple[int, str, Any]], replaced: Container[int] = ()
) -> dict[str, pa.Table]:
    """The table `name` of `rows` ((id, `_dlt_id`, values) each) and a child table per
    list of models, `name__details`…; the child rows of the ids `replaced` are replaced
    (marker rows). `_Refused` names by id every row holding a value a column of any of
    the tables cannot hold."""
    ids = [i for i, _, _ in rows]
    keys = pa.array([k for _, k, _ in rows], pa.string())
    values = [v for _, _, v in rows]
    refused: dict[int, str] = {}
    tables: dict[str, pa.Table] = {}
    try:
        tables[name] = _table({**_arrays(cls, values), "_dlt_id": keys})
    except _Refused as exc:
        refused = {ids[n]: why for n, why in exc.args[0].items()}
    marked = [(i, k) for i, k, _ in rows if i in replaced]
    for child, item_cls in _children(cls).items():
        lists = [getattr(v, child) or () for v in values]
        owners = [n for n, items in enumerate(lists) for _ in items]
        try:
            arrays = _arrays(item_cls, list(itertools.chain.from_iterable(lists)))
        except _Refused as exc:
            for n, why in exc.args[0].items():
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
        tables[f"{name}__{child}"] = table
    if refused:
        raise _Refused(refused)
    return tables


def _tables(
    documents: list[InvoiceDocument], *, scd2: bool, stored: Container[int] = ()
) -> tuple[dict[str, pa.Table], dict[int, str]]:
    """The `invoices` table and its child tables of fetched invoices, and {id: why} of the
    invoices left out, holding a value a column cannot hold. An invoice's `_dlt_id` is its
    id; with scd2 a hash of its document, the key of a version. The child rows of those
    `stored` are replaced (marker rows)."""
    invoices = [
        (d.id or 0, hashlib.blake2b(d.document, digest_size=16).hexdigest(), d.values())
        if scd2
        else (d.id or 0, str(d.id), d.values())
        for d in documents
    ]
    refused: dict[int, str] = {}
    while True:  # each round leaves out at least one invoice
        try:
            return _build(Invoice, "invoices", invoices, [] if scd2 else stored), refused
        except _Refused as exc:
            refused.update(exc.args[0])
            invoices = [i for i in invoices if i[0] not in refused]


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


def _emptied(package: Mapping[str, Any]) -> bool:
    """Whether a load package's dlt refresh drops or truncates the `invoices` table
    before it loads (`refresh=` of `pipeline.run`)."""
    refreshed = [*package.get("dropped_tables", ()), *package.get("truncated_tables", ())]
    return any(table["name"] == "invoices" for table in refreshed)


def _stored_revisions(pipeline: dlt.Pipeline, *, scd2: bool) -> SyncRevisions:
    """`{id: revision}` of the invoices in the destination (current rows with scd2); empty
    when the dataset does not exist (a first load, or a dropped dataset), or when the
    `invoices` table alone was dropped (its nested tables, orphans now, are dropped too)."""
    revisions = SyncRevisions()
    with pipeline.sql_client() as sql:  # names every naming convention keeps as they are
        if not sql.has_dataset():
            return revisions
        ident, revision, valid_to = map(sql.escape_column_name, ["id", "revision", "_dlt_valid_to"])
        table = sql.make_qualified_table_name("invoices")
        current = f" WHERE {valid_to} IS NULL" if scd2 else ""
        query = f"SELECT {ident}, {revision} FROM {table}{current} ORDER BY {ident}"
        try:
            with sql.execute_query(query) as cursor:
                while rows := cursor.fetchmany(50_000):
                    for found, at in rows:
                        revisions.add(int(found), int(at or 0))
        except DestinationUndefinedEntity:
            sql.drop_tables(*(f"invoices__{name}" for name in _children(Invoice)))
            return SyncRevisions()
    return revisions


async def _invoices(
    account: _Account, *, scd2: bool, settings: fetching.SyncSettings
) -> AsyncIterator[Any]:
    """The `invoices` resource: deletion markers, then new and changed invoices in
    batches of 100 from the engine's fetch phase."""
    state = dlt.current.resource_state("invoices")
    pipeline = dlt.current.pipeline()
    package = dlt.current.load_package_state()
    # The destination is read whatever this pipeline's own state says (it may have none:
    # another pipeline on the dataset, a lost folder), unless this load's dlt refresh
    # drops or empties the table first. Extract only: nothing is known, so it merges.
    bound = getattr(pipeline, "destination", None) is not None
    stored: Mapping[int, int] = (
        _stored_revisions(pipeline, scd2=scd2) if bound and not _emptied(package["state"]) else {}
    )
    # The destination holds no invoice (a first load, a refresh, a dropped table): its
    # tables are written anew, with no merge and no marker row, since nothing there can
    # be lost, even by a load the budget stops part-way; a hint naming this load makes a
    # new schema version, which has dlt create any table dropped behind its back again
    # (scd2 keeps its merge, which sets the validity columns).
    anew = {"x-invoicing-written-anew": package["load_id"]} if bound and not stored else None
    pending = {int(i): PendingEntry(*e) for i, e in state.get(_PENDING, {}).items()}
    reasons: dict[str, str] = state.get("reasons", {})
    async with account.client() as client:
        plan = await settings.plan(client, stored, pending)
        if plan.deletions_refused:
            logger.warning("deletions not applied: %s", plan.deletions_refused)
        if plan.to_delete:
            deleted = list(plan.to_delete)
            yield _markers(deleted, [], root=True)
            for name in [] if scd2 else _children(Invoice):
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
                for item in _yielded(fetched, phase, anew, scd2=scd2, stored=stored):
                    yield item
                fetched, anew = [], None  # the hints stay with the resource
        if fetched or anew:
            for item in _yielded(fetched, phase, anew, scd2=scd2, stored=stored):
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
    account.invoices_done.set()


def _yielded(
    documents: list[InvoiceDocument],
    phase: fetching.FetchPhase,
    anew: dict[str, Any] | None,
    *,
    scd2: bool,
    stored: Container[int],
) -> Iterator[Any]:
    """The tables of `documents`, each marked with its table name (and `anew`, hints of
    tables written anew); the invoices they cannot hold quarantined."""
    tables, refused = _tables(documents, scd2=scd2, stored=stored)
    phase.quarantine(refused)
    for name, table in tables.items():
        root = name == "invoices"
        if anew and (root or table.num_rows):
            hints = dlt.mark.make_hints(
                table_name=name,
                write_disposition=None if scd2 else "replace",
                additional_table_hints=anew if root else None,
            )
            yield dlt.mark.with_hints(table, hints, create_table_variant=not root)
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


async def _recurring_templates(account: _Account) -> AsyncIterator[pa.Table]:
    async with account.client() as client:
        templates = await client.recurring_templates.list()
    rows = [(t.id or 0, str(t.id), t) for t in templates]
    for name, table in _build(RecurringTemplate, "recurring_templates", rows).items():
        yield dlt.mark.with_table_name(table, name)  # an empty one empties its table


async def _current_session(account: _Account) -> AsyncIterator[pa.Table]:
    async with account.client() as client:
        session = await client.current_session()
    yield _build(CurrentSession, "current_session", [(0, str(session.id), session)])[
        "current_session"
    ]


def _typed(resource: DltResource, cls: type[Model], root: Any, child: Any) -> DltResource:
    """`resource` with typed columns and write dispositions (`root`, `child`) for its
    table and a child table per list of models of `cls`, all Arrow, Parquet load files."""
    for name, item_cls in _children(cls).items():  # before the root's, which variants copy
        resource.apply_hints(
            table_name=f"{resource.name}__{name}",
            write_disposition=child,
            columns={**_columns(item_cls), **_CHILD_KEYS},
            create_table_variant=True,
        )
    resource.apply_hints(
        write_disposition=root, columns={**_columns(cls), "_dlt_id": _CHILD_KEYS["_dlt_id"]}
    )
    return resource


@dlt.source(name="invoicing")
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
            keep_values=True,
        ),
    )
    # scd2 keys a version by its `_dlt_id`, the other strategy an invoice by its id
    child = _merge("_dlt_id" if scd2 else "_dlt_root_id")
    yield _typed(invoices, Invoice, _merge("id", scd2=scd2), child).apply_hints(
        primary_key=() if scd2 else "id"
    )
    yield dlt.resource(
        _quarantine,
        name="quarantine",
        write_disposition="replace",
        columns=_QUARANTINE_COLUMNS,
    )(account)
    templates = dlt.resource(_recurring_templates, name="recurring_templates")(account)
    yield _typed(templates, RecurringTemplate, "replace", "replace").apply_hints(primary_key="id")
    session = dlt.resource(_current_session, name="current_session")(account)
    # The session's `extra` goes as JSON text and is hinted so: a json hint over the
    # Arrow string column made dlt warn of differing hints on every run.
    yield _typed(session, CurrentSession, "replace", "replace").apply_hints(
        columns={"extra": _SESSION_EXTRA}
    )
