"""How a load writes the invoices' tables, and the state it keeps between runs: merge
(delete-insert, or scd2's versions) against what the destination holds, or written anew
when it holds nothing; the pending plan (quarantine, rechecks) in the resource state."""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any, Literal

import attrs
import dlt
from dlt.common.destination.exceptions import DestinationUndefinedEntity

from invoicing_async._sync.store import PendingEntry
from invoicing_async.contrib.dlt import _arrow
from invoicing_async.models import Invoice, SyncRevisions

__all__ = [
    "REAL_ROWS",
    "Yield",
    "dispositions",
    "emptied",
    "kept_state",
    "pending",
    "quarantined",
    "stored_revisions",
    "written_anew",
    "yielded_as",
]

# dlt writes no rows of a resource into its nested tables, so `invoices__details` and
# the other child tables are tables of the `invoices` resource in their own right, merged
# on the key their rows share with their invoice row (`_dlt_root_id` = `invoices._dlt_id`).
# An invoice in the load (fetched or deleted) also sends a marker row to each table, a
# `_dlt_id` starting with "-": the merge deletes (scd2: closes) the stored rows of every
# invoice it receives, then inserts the real rows only, so no marker column is stored.
REAL_ROWS = "_dlt_id NOT LIKE '-%'"
_PENDING = "pending"  # resource state: the plan's quarantined ids and rechecks
_REASONS = "reasons"  # resource state: why each quarantined invoice is


def _merge(key: str, *, scd2: bool = False) -> dict[str, Any]:
    """dlt's merge of a table whose stored rows are deleted (scd2: closed) when their
    `key` is in the load (a child row of a scd2 version is written once)."""
    return {
        "disposition": "merge",
        "strategy": "scd2" if scd2 else "delete-insert",
        "source_filter": REAL_ROWS,
        "destination_scope": f"{key} IN (SELECT {key} FROM {{staging_table}})",
    }


def dispositions(*, scd2: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The write dispositions of `invoices` and of its child tables: scd2 keys a version
    by its `_dlt_id`, delete-insert an invoice by its id (`_dlt_root_id` in a child)."""
    return _merge("id", scd2=scd2), _merge("_dlt_id" if scd2 else "_dlt_root_id")


def emptied(package: Mapping[str, Any]) -> bool:
    """Whether a load package's dlt refresh drops or truncates the `invoices` table
    before it loads (`refresh=` of `pipeline.run`)."""
    refreshed = [*package.get("dropped_tables", ()), *package.get("truncated_tables", ())]
    return any(table["name"] == "invoices" for table in refreshed)


def stored_revisions(pipeline: dlt.Pipeline, *, scd2: bool) -> SyncRevisions:
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
            sql.drop_tables(*(f"invoices__{name}" for name in _arrow.children(Invoice)))
            return SyncRevisions()
    return revisions


def written_anew(load_id: str, *, bound: bool, stored: Mapping[int, int]) -> dict[str, Any] | None:
    """The table hints of a load that writes the invoices' tables anew (None: it merges).

    When the destination holds no invoice (a first load, a refresh, a dropped table)
    nothing there can be lost, even by a load the budget stops part-way, so its tables
    are written with no merge and no marker row; a hint naming this load makes a new
    schema version, which has dlt create any table dropped behind its back again. A load
    extracted with no destination (`bound` false) knows nothing, so it merges."""
    if bound and not stored:
        return {"x-invoicing-written-anew": load_id}
    return None


@attrs.frozen
class Yield:
    """How one table of fetched invoices goes to dlt: under its name alone (merged by the
    resource's hints), or `anew` with the hints of a table written anew."""

    anew: bool
    #: For `anew`: "replace", or None when scd2 keeps its merge (it sets the validity).
    write_disposition: Literal["replace"] | None = None
    #: For `anew`, the root table's: the hints naming this load (`written_anew`).
    table_hints: dict[str, Any] | None = None


def yielded_as(name: str, rows: int, anew: dict[str, Any] | None, *, scd2: bool) -> Yield | None:
    """How the table `name` of `rows` rows goes (None: not at all). Written anew, the
    root table goes even empty (to be created) and a child table when it has rows; merged,
    a table goes when it has rows."""
    root = name == "invoices"
    if anew and (root or rows):
        return Yield(True, None if scd2 else "replace", anew if root else None)
    if rows:
        return Yield(False)
    return None


def pending(state: Mapping[str, Any]) -> dict[int, PendingEntry]:
    """The pending plan the last run left in the resource state: {id: entry}."""
    return {int(i): PendingEntry(*e) for i, e in state.get(_PENDING, {}).items()}


def kept_state(
    state: dict[str, Any],
    remaining: Mapping[int, PendingEntry],
    queued: Container[int],
    unreadable: Mapping[int, str],
) -> None:
    """Write the run's pending plan into the resource state: the `remaining` entries but
    those merely queued (never tried: the next plan finds them again), and why each
    quarantined one is (this run's reason, else the one kept from before)."""
    reasons: dict[str, str] = state.get(_REASONS, {})
    kept = {i: e for i, e in remaining.items() if i not in queued or e.attempts}
    state[_PENDING] = {str(i): attrs.astuple(e) for i, e in kept.items()}
    state[_REASONS] = {
        str(i): unreadable.get(i, reasons.get(str(i), "")) for i, e in kept.items() if e.quarantined
    }


def quarantined(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of the `quarantine` table: the quarantined invoices of the resource
    state, with their revision and why."""
    entries = state.get(_PENDING, {})
    return [
        {"id": int(i), "revision": entries[i][1], "reason": why}
        for i, why in state.get(_REASONS, {}).items()
        if i in entries
    ]
