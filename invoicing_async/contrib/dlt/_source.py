"""The source and its resources: `invoices` from the sync engine's fetch phase (its
tables from `_arrow`, written as `_load` chooses), `quarantine`, `recurring_templates`
and `current_session`, all through one account's client and budget."""

from __future__ import annotations

import asyncio
import contextlib
import ssl as _ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import attrs
import dlt
import pyarrow as pa
from dlt.common.schema.typing import TColumnSchema, TTableSchemaColumns
from dlt.extract.resource import DltResource

from invoicing_async import Auth, BasicAuth, Format, InvoicingClient, RateBudget
from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._sync import fetching
from invoicing_async._sync.report import SyncReport
from invoicing_async._text import package_logger as _package_logger
from invoicing_async.contrib.dlt import _arrow, _load
from invoicing_async.models import CurrentSession, Invoice, Model, RecurringTemplate

__all__ = ["invoicing_source"]

logger = _package_logger("invoicing_async.contrib.dlt")

# dlt's cost is per yielded table: the fetched batches are gathered into tables of up to
# this many invoices (all in the same load package, so no less crash-safe).
_TABLE_SIZE = 10_000
_CHILD_KEYS: TTableSchemaColumns = {
    "_dlt_id": {"name": "_dlt_id", "data_type": "text", "nullable": False},
    "_dlt_parent_id": {"data_type": "text"},
    "_dlt_root_id": {"name": "_dlt_root_id", "data_type": "text"},
    "_dlt_list_idx": {"data_type": "bigint"},
}
_QUARANTINE_COLUMNS: TTableSchemaColumns = {
    "id": {"name": "id", "data_type": "bigint", "nullable": False},
    "revision": {"name": "revision", "data_type": "bigint", "nullable": False},
    "reason": {"name": "reason", "data_type": "text", "nullable": False},
}
_SESSION_EXTRA: TColumnSchema = {"name": "extra", "data_type": "text", "nullable": True}


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
        _load.stored_revisions(pipeline, scd2=scd2)
        if bound and not _load.emptied(package["state"])
        else {}
    )
    anew = _load.written_anew(package["load_id"], bound=bound, stored=stored)
    async with account.client() as client:
        plan = await settings.plan(client, stored, _load.pending(state))
        if plan.deletions_refused:
            logger.warning("deletions not applied: %s", plan.deletions_refused)
        if plan.to_delete:
            deleted = list(plan.to_delete)
            yield _arrow.markers(deleted, [], root=True)
            for name in [] if scd2 else _arrow.children(Invoice):
                marked = _arrow.markers(deleted, [str(i) for i in deleted], root=False)
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
    _load.kept_state(state, phase.remaining_plan(), queued, report.unreadable)
    account.invoices_done.set()


def _yielded(
    documents: list[InvoiceDocument],
    phase: fetching.FetchPhase,
    anew: dict[str, Any] | None,
    *,
    scd2: bool,
    stored: Mapping[int, int],
) -> Iterator[Any]:
    """The tables of `documents`, each marked with its table name (and `anew`, hints of
    tables written anew); the invoices they cannot hold quarantined."""
    tables, refused = _arrow.tables(documents, scd2=scd2, stored=stored)
    phase.quarantine(refused)
    for name, table in tables.items():
        how = _load.yielded_as(name, table.num_rows, anew, scd2=scd2)
        if how is None:
            continue
        if how.anew:
            hints = dlt.mark.make_hints(
                table_name=name,
                write_disposition=how.write_disposition,
                additional_table_hints=how.table_hints,
            )
            yield dlt.mark.with_hints(table, hints, create_table_variant=name != "invoices")
        else:
            yield dlt.mark.with_table_name(table, name)


async def _quarantine(account: _Account) -> AsyncIterator[list[dict[str, Any]]]:
    """The `quarantine` table: the invoices quarantined by the `invoices` run (by the
    last one when that resource is not loaded now), with why."""
    if "invoices" in dlt.current.source().selected_resources:
        await account.invoices_done.wait()
    yield _load.quarantined(dlt.current.resource_state("invoices"))


async def _recurring_templates(account: _Account) -> AsyncIterator[pa.Table]:
    async with account.client() as client:
        templates = await client.recurring_templates.list()
    rows = [(t.id or 0, str(t.id), t) for t in templates]
    for name, table in _arrow.build(RecurringTemplate, "recurring_templates", rows).items():
        yield dlt.mark.with_table_name(table, name)  # an empty one empties its table


async def _current_session(account: _Account) -> AsyncIterator[pa.Table]:
    async with account.client() as client:
        session = await client.current_session()
    yield _arrow.build(CurrentSession, "current_session", [(0, str(session.id), session)])[
        "current_session"
    ]


def _typed(resource: DltResource, cls: type[Model], root: Any, child: Any) -> DltResource:
    """`resource` with typed columns and write dispositions (`root`, `child`) for its
    table and a child table per list of models of `cls`, all Arrow, Parquet load files."""
    for name, item_cls in _arrow.children(cls).items():  # before the root's, which variants copy
        resource.apply_hints(
            table_name=f"{resource.name}__{name}",
            write_disposition=child,
            columns={**_arrow.columns(item_cls), **_CHILD_KEYS},
            create_table_variant=True,
        )
    resource.apply_hints(
        write_disposition=root, columns={**_arrow.columns(cls), "_dlt_id": _CHILD_KEYS["_dlt_id"]}
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
    root, child = _load.dispositions(scd2=scd2)
    yield _typed(invoices, Invoice, root, child).apply_hints(primary_key=() if scd2 else "id")
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
