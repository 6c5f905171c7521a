"""How the dlt source writes the invoices' tables and what it keeps between runs, with no
pipeline: merge or scd2 against what is stored, written anew when nothing is, the
pending plan and the quarantine in the resource state."""

from __future__ import annotations

from typing import Any

import pytest

from invoicing_async import BasicAuth, RateBudget
from invoicing_async._sync.store import PendingEntry
from invoicing_async.contrib.dlt import _load
from invoicing_async.contrib.dlt._source import _Account
from invoicing_async.models import SyncRevisions


def test_invoices_merge_by_id_and_their_child_rows_by_their_invoice() -> None:
    root, child = _load.dispositions(scd2=False)
    assert root == {
        "disposition": "merge",
        "strategy": "delete-insert",
        "source_filter": "_dlt_id NOT LIKE '-%'",  # marker rows delete, never stored
        "destination_scope": "id IN (SELECT id FROM {staging_table})",
    }
    assert child["strategy"] == "delete-insert"
    assert child["source_filter"] == _load.REAL_ROWS
    assert child["destination_scope"] == (
        "_dlt_root_id IN (SELECT _dlt_root_id FROM {staging_table})"
    )


def test_scd2_closes_versions_and_writes_a_versions_child_rows_once() -> None:
    root, child = _load.dispositions(scd2=True)
    assert root["strategy"] == "scd2"
    assert root["source_filter"] == _load.REAL_ROWS  # a deleted invoice's marker closes it
    assert root["destination_scope"] == "id IN (SELECT id FROM {staging_table})"
    assert child["strategy"] == "delete-insert"  # keyed by the version's `_dlt_id`
    assert child["destination_scope"] == "_dlt_id IN (SELECT _dlt_id FROM {staging_table})"


@pytest.mark.parametrize(
    ("package", "emptied"),
    [
        ({}, False),
        ({"dropped_tables": [{"name": "invoices"}]}, True),
        ({"truncated_tables": [{"name": "invoices"}]}, True),
        ({"dropped_tables": [{"name": "current_session"}], "truncated_tables": []}, False),
    ],
)
def test_a_refresh_that_drops_or_empties_the_invoices_table_is_seen(
    package: dict[str, Any], emptied: bool
) -> None:
    assert _load.emptied(package) is emptied


def test_nothing_stored_writes_the_tables_anew() -> None:
    """Bound to a destination that holds no invoice: replaced, a hint naming the load;
    anything stored, or no destination known (extract only): merged."""
    stored = SyncRevisions()
    assert _load.written_anew("17.5", bound=True, stored=stored) == {
        "x-invoicing-written-anew": "17.5"
    }
    stored.add(1, 5)
    assert _load.written_anew("17.5", bound=True, stored=stored) is None
    assert _load.written_anew("17.5", bound=False, stored={}) is None


def test_how_each_table_goes() -> None:
    """Written anew, the root goes even empty (created, emptied) with the load's hint,
    a child table with rows; scd2 keeps its merge. Merged, a table goes with rows."""
    anew = {"x-invoicing-written-anew": "17.5"}
    assert _load.yielded_as("invoices", 0, anew, scd2=False) == _load.Yield(True, "replace", anew)
    assert _load.yielded_as("invoices", 3, anew, scd2=True) == _load.Yield(True, None, anew)
    assert _load.yielded_as("invoices__details", 2, anew, scd2=False) == _load.Yield(
        True, "replace", None
    )
    assert _load.yielded_as("invoices__details", 0, anew, scd2=False) is None
    assert _load.yielded_as("invoices", 3, None, scd2=False) == _load.Yield(False)
    assert _load.yielded_as("invoices__details", 3, None, scd2=True) == _load.Yield(False)
    assert _load.yielded_as("invoices", 0, None, scd2=False) is None


def test_the_state_keeps_what_the_next_run_must_do_and_why() -> None:
    """Quarantined and retried ids are kept, ids merely queued are not (the next plan
    lists them again); a reason is this run's, else the one kept from before."""
    state: dict[str, Any] = {"reasons": {"4": "kept from before", "9": "gone since"}}
    remaining = {
        1: PendingEntry(1, 10),  # queued, never tried
        2: PendingEntry(2, 20, attempts=1),  # queued after a failed try
        3: PendingEntry(3, 30, attempts=3, quarantined=True, since=100.0),
        4: PendingEntry(4, 40, attempts=3, quarantined=True, since=50.0),
        5: PendingEntry(5, 50, quarantined=True, since=60.0),
    }
    _load.kept_state(state, remaining, queued={1, 2}, unreadable={3: "price has 5 places"})
    assert _load.pending(state) == {i: remaining[i] for i in (2, 3, 4, 5)}
    assert state["reasons"] == {"3": "price has 5 places", "4": "kept from before", "5": ""}
    assert _load.quarantined(state) == [
        {"id": 3, "revision": 30, "reason": "price has 5 places"},
        {"id": 4, "revision": 40, "reason": "kept from before"},
        {"id": 5, "revision": 50, "reason": ""},
    ]


def test_a_first_run_has_no_pending_plan_and_no_quarantine() -> None:
    assert _load.pending({}) == {}
    assert _load.quarantined({}) == []
    # a reason whose entry is gone is no row
    assert _load.quarantined({"pending": {}, "reasons": {"3": "why"}}) == []


@pytest.mark.parametrize(("wait", "max_wait"), [(True, None), (False, 60.0)])
async def test_waiting_for_the_budget_lifts_the_clients_max_wait(
    wait: bool, max_wait: float | None
) -> None:
    """What tells the two apart beyond a minute's wait (the client's default `max_wait`):
    the resources' client waits as long as it takes only with `wait_for_budget`."""
    account = _Account(
        base_url="https://acct.example.com",
        auth=BasicAuth("api-user", "pw"),
        ssl=None,
        format="json",
        budget=RateBudget(),
        budget_url=None,
        wait_for_budget=wait,
    )
    async with account.client() as client:
        assert client._options.max_wait == max_wait  # noqa: SLF001
        assert client._options.background  # noqa: SLF001 - leaves the reserve alone
