"""Decode throughput: 100-invoice responses (5 lines each) from bytes to models, against
bare `xmltodict.parse` / `json.loads` of the same bytes; a JSON sync-fetch reply to the
documents a sync stores (checked, no models) against `json.loads`; and 5,000-entry sync
lists to `SyncRevisions`, in XML against the least an expat handler can do (collect the id
and revision texts), in JSON against `json.loads`. Ours and the baseline run in turns;
the ratio is of the fastest runs, the medians' ratio is in the note."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from typing import Any
from xml.parsers.expat import ParserCreate

import attrs
import xmltodict

from benchmarks.common import Result, paired_timings
from invoicing_async import Format
from invoicing_async._models.documents import load_list, load_sync_revisions
from invoicing_async._models.stored import load_invoice_documents
from invoicing_async.models import Invoice, SyncEntry
from invoicing_async.testing import FakeInvoicingService
from invoicing_async.testing._writers import dump_list, dump_sync_entries

SYNC_ENTRIES = 5_000
#: Fields the real service sent beyond the specification (field notes), with their kinds.
FIELD_NOTES_EXTRA = {
    "tax_components": [{"rate": "21.0", "amount": "154.49"}],
    "sepa_active": False,
    "sent_at": "2026-04-14T09:00:00+02:00",
    "attachments": [],
    "transactions": [],
    "sender_address": {"city": "Utrecht", "address": "Main 1"},
}


def minimal_sync_handler(body: bytes) -> tuple[list[str], list[str]]:
    """The floor for a sync list on expat: the id and revision texts, nothing else."""
    ids: list[str] = []
    revisions: list[str] = []
    current = ""

    def start(name: str, _attrs: list[str]) -> None:
        nonlocal current
        current = name

    def chars(data: str) -> None:
        if current == "id":
            ids.append(data)
        elif current == "revision":
            revisions.append(data)

    def end(_name: str) -> None:
        nonlocal current
        current = ""

    parser = ParserCreate()
    parser.buffer_text = True
    parser.ordered_attributes = True
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    parser.Parse(body, True)
    return ids, revisions


def _result(
    name: str, ours: Callable[[], object], baseline: Callable[[], object], target: float, note: str
) -> Result:
    mine, theirs = paired_timings(ours, baseline, repeat=31)
    median = statistics.median(mine) / statistics.median(theirs)
    return Result(
        name=name,
        ours=min(mine),
        baseline=min(theirs),
        unit="s",
        target=target,
        note=f"{note}; ratio of medians {median:.3f}",
    )


def run() -> list[Result]:
    service = FakeInvoicingService(invoices=100, seed=1)
    invoices = list(service.account.invoices.values())
    results = []
    cases: tuple[tuple[Format, Callable[[bytes], Any], float], ...] = (
        ("xml", xmltodict.parse, 0.5),
        ("json", json.loads, 6.0),
    )
    for fmt, baseline_fn, target in cases:
        # What the fake sends: the real service's shape (fields beyond the specification).
        body = dump_list(invoices, fmt, Invoice, real_shape=True)
        assert load_list(body, fmt, Invoice) == [service.account.as_read(i, fmt) for i in invoices]

        def baseline(b: bytes = body, f: Callable[[bytes], Any] = baseline_fn) -> Any:
            return f(b)

        def decode(b: bytes = body, f: Format = fmt) -> Any:
            return load_list(b, f, Invoice)

        name = "xmltodict.parse" if fmt == "xml" else "json.loads"
        results.append(
            _result(
                f"decode {fmt}: seconds per 100-invoice response",
                decode,
                baseline,
                target,
                f"{len(body)} bytes (baseline {name})",
            )
        )
    # More of the field notes' fields beyond the specification on every invoice and line,
    # which `extra` keeps (the fake sends a smaller set of them).
    noted = [
        attrs.evolve(
            invoice,
            extra=dict(FIELD_NOTES_EXTRA),
            details=[attrs.evolve(line, extra={"tax": "2.63"}) for line in invoice.details],
        )
        for invoice in invoices
    ]
    body = dump_list(noted, "json", Invoice)
    assert load_list(body, "json", Invoice) == noted
    results.append(
        _result(
            "decode json, the field notes' extra fields: seconds per 100-invoice response",
            lambda: load_list(body, "json", Invoice),
            lambda: json.loads(body),
            6.0,
            f"{len(body)} bytes (baseline json.loads); the shape a C-typed strict struct refuses",
        )
    )
    # What a sync does with a reply: documents for the store, no models (JSON checked in C).
    body = dump_list(invoices, "json", Invoice, real_shape=True)
    documents, failed = load_invoice_documents(body, "json", limit=100)
    assert not failed
    assert [d.model() for d in documents] == [service.account.as_read(i, "json") for i in invoices]
    results.append(
        _result(
            "sync-fetch reply to stored documents (json): seconds per 100 invoices",
            lambda: load_invoice_documents(body, "json", limit=100),
            lambda: json.loads(body),
            1.5,
            f"{len(body)} bytes (baseline json.loads, which checks nothing)",
        )
    )
    entries = [SyncEntry(id=i, revision=1_400_000_000 + i) for i in range(1, SYNC_ENTRIES + 1)]
    sync = dump_sync_entries(entries, "xml")
    assert dict(load_sync_revisions(sync, "xml")) == {e.id: e.revision for e in entries}
    assert len(minimal_sync_handler(sync)[0]) == SYNC_ENTRIES
    sync_json = dump_sync_entries(entries, "json")
    assert dict(load_sync_revisions(sync_json, "json")) == {e.id: e.revision for e in entries}
    results.append(
        _result(
            f"decode json: seconds per {SYNC_ENTRIES:,}-entry sync list",
            lambda: load_sync_revisions(sync_json, "json"),
            lambda: json.loads(sync_json),
            1.0,
            f"{len(sync_json)} bytes (baseline json.loads)",
        )
    )
    results.append(
        _result(
            f"decode xml: seconds per {SYNC_ENTRIES:,}-entry sync list",
            lambda: load_sync_revisions(sync, "xml"),
            lambda: minimal_sync_handler(sync),
            1.5,
            f"{len(sync)} bytes (baseline an expat handler keeping only id/revision text)",
        )
    )
    return results
